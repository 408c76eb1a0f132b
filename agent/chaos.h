/* agent/chaos — fault injection on a real agent (issue 20, docs/CHAOS.md).
 *
 * Three parts share this header:
 *   agent/chaos_agent.c  the agent's side: the [faults] config applied to
 *                        the transport's injector (net/faults.h) and to the
 *                        built-in trainer (pause, slow), the runtime control
 *                        (a control frame over the secure channel, obeyed
 *                        only from the node ids of faults.admin_keys_file),
 *                        the log lines and the /metrics counters;
 *   agent/cmd_fault.c    `murmur fault HOST:PORT ...`, the control's client;
 *   agent/cmd_chaos.c    `murmur chaos`: a schedule run against a cluster
 *   + chaos_*.c          with a checker (agent/chaos_run.h).
 *
 * Control frames travel over the same authenticated channel as gossip
 * frames, but they are not gossip frames: they start with the magic "MF"
 * (gossip frames start with "MR", so neither is ever taken for the other).
 *   [0..2) "MF"  [2] version 1  [3] kind (1 request, 2 reply)
 *   [4..8) request id, big-endian (a reply repeats it)
 *   [8..)  text, at most AGENT_FAULT_CTL_TEXT_MAX bytes, no NUL
 * A request's text is whitespace-separated words (agent_fault_request_apply
 * below); a reply's is "ok" or "error: WHY" on the first line, then the
 * faults in force, one per line.
 *
 * Authorisation: the channel proves the sender's node id (BLAKE2b of its
 * Ed25519 key, net/net.h); a request is obeyed only when that id is the id
 * of a key in faults.admin_keys_file. No file, an unreadable one or one
 * with no key admits nobody. The metrics endpoint (unauthenticated HTTP)
 * never changes faults.
 */
#ifndef AGENT_CHAOS_H
#define AGENT_CHAOS_H

#include <stddef.h>
#include <stdint.h>

#include "agent/agent.h"
#include "net/faults.h"

#define AGENT_FAULT_CTL_VERSION   1u
#define AGENT_FAULT_CTL_REQUEST   1u
#define AGENT_FAULT_CTL_REPLY     2u
#define AGENT_FAULT_CTL_HEADER    8u
#define AGENT_FAULT_CTL_TEXT_MAX  4096u
#define AGENT_FAULT_CTL_FRAME_MAX (AGENT_FAULT_CTL_HEADER + AGENT_FAULT_CTL_TEXT_MAX)
/* Admin keys: a handful of operators or chaos runners. */
#define AGENT_FAULT_ADMINS_MAX 64u
/* Peers one request may name. */
#define AGENT_FAULT_REQ_PEERS_MAX 32u

/* 1 if frame is a control frame (whatever its kind or validity). */
int agent_fault_ctl_is(const uint8_t *frame, size_t len);
/* Encode a control frame into out (cap >= AGENT_FAULT_CTL_HEADER + text
 * length); returns its length, 0 if the text is too long. */
size_t agent_fault_ctl_encode(uint8_t *out, size_t cap, unsigned kind, uint32_t id,
                              const char *text);
/* Decode: 0 and *kind, *id, the text copied NUL-terminated into text[cap];
 * -1 for a bad version, kind or length. */
int agent_fault_ctl_decode(const uint8_t *frame, size_t len, unsigned *kind, uint32_t *id,
                           char *text, size_t cap);

/* Send one request (text) to the agent at addr (HOST:PORT or tcp://...) as
 * the key pair of key_file, under the network key (ring) of netkey_file,
 * and wait up to timeout_ms for the reply, copied to reply[cap]. Returns 0
 * (the agent answered "ok"), 1 (it answered an error: refused, invalid) or
 * -1 (no answer, or a local failure; reply says why). agent/cmd_fault.c;
 * murmur chaos uses it too. */
int agent_fault_send(const char *addr, const char *key_file, const char *netkey_file,
                     const char *text, uint32_t timeout_ms, char *reply, size_t cap);

/* ---- the agent's side (chaos_agent.c) ---- */

typedef struct agent_faults agent_faults;

/* With faults.enable: turn the transport's injector on, apply the config's
 * faults, read the admin keys and register the metrics. Without it: *out =
 * NULL and nothing happens. Returns 0, or -1 with a message in err. */
int agent_faults_create(agent_faults **out, murmur_agent *a, char *err, size_t errlen);
void agent_faults_destroy(agent_faults *f);

/* The event loop hands every control frame here (agent_fault_ctl_is):
 * obeyed from an admin, refused (counted, logged once, answered with an
 * error) from anyone else or when faults are off (f NULL). The reply goes
 * back to `from` over the transport. */
void agent_faults_on_frame(agent_faults *f, murmur_agent *a, uint64_t from, const uint8_t *frame,
                           size_t len);
/* Copy the injector's frame counts to /metrics (the loop's metrics pass). */
void agent_faults_sync_metrics(agent_faults *f);

/* The pause and slow faults act on the host program, whatever it is (the
 * built-in trainer or a libmurmur host): murmur_mix, which every host calls
 * after its steps, calls this before it returns. It returns at once
 * without faults; when the host is slowed by F it sleeps (F - 1) x the
 * host's step, measured as the time since murmur_mix last returned (so
 * the host's loop runs F times slower, whatever it does between calls);
 * while the host is paused it waits (in naps of 50 ms, so a stop is seen
 * at once). Returns 1 when the agent is stopping. The host's thread only
 * (murmur_mix's caller). */
int agent_faults_host_gate(murmur_agent *a);

/* For /status: what the faults did so far. */
typedef struct agent_faults_summary {
    uint32_t active;          /* rules, partition, pause or slow in force */
    uint64_t applied;         /* faults applied (config and control) */
    uint64_t removed;         /* faults removed */
    uint64_t frames;          /* frames a fault touched, all kinds */
    uint32_t training_paused; /* 1 while the trainer is paused */
    double training_slow;     /* factor, 1 = normal */
} agent_faults_summary;
void agent_faults_summary_get(agent_faults *f, agent_faults_summary *out);
/* The same into /status's fields (nothing when f is NULL). */
struct agent_status;
void agent_faults_status(agent_faults *f, struct agent_status *st);

/* Apply one request's words to the injector and the trainer state; the
 * reply text goes to reply[cap]. Words: peer=ID (repeatable; none = all
 * peers), drop=P delay_ms=MS jitter_ms=MS bandwidth_bps=N duplicate=P
 * reorder=P reorder_window_ms=MS corrupt=P (any of these replaces the
 * named peers' link rule by one with just these fields; all zero removes
 * it), partition=ID,ID,... (replaces the partition; empty heals),
 * pause=0|1, slow=F, clear (every fault off), show (nothing changes).
 * Returns 0, or -1 (nothing applied; reply holds "error: WHY"). Exposed
 * for the unit tests; `from` names the requester in the log lines. */
int agent_faults_request(agent_faults *f, uint64_t from, const char *text, char *reply, size_t cap);

#endif
