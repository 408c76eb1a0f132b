/* murmur — decentralized training without a coordinator.
 * One binary; the first argument picks the subcommand (agent/commands.h). */
#include "agent/commands.h"

#include <cblas.h>
#include <nng/nng.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "agent/version.h"
#include "common/text.h"
#include "model/blas.h"

static int cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("murmur %s (commit %s)\nlibsodium %s\nnng %s\nopenblas %s (core %s)\nzlib %s\n",
           agent_version(), agent_version_commit(), sodium_version_string(), nng_version(),
           openblas_get_config(), model_blas_core(), zlibVersion());
    return 0;
}

static const agent_command commands[] = {
    {"version", cmd_version, "print the version of murmur and of the libraries it uses"},
    {"keygen", cmd_keygen, "create an agent key pair or a cluster network key"},
    {"status", cmd_status, "show a running agent's state (GET /status from HOST:PORT)"},
    {"train", cmd_train, "train a model on one machine (Fashion-MNIST, IDX, CSV or shards)"},
    {"shard", cmd_shard, "split a data set into content-addressed shard files"},
    {"export", cmd_export, "write a checkpoint's model as .npz, .safetensors or raw float32"},
    {"agent", cmd_agent, "run an agent: join peers, train on shards, mix models"},
    {"launch", cmd_launch, "start a cluster of N agents here or over ssh, watch it, stop it"},
    {"bench", cmd_bench, "measure allreduce between N local agents over the real network path"},
    {"sim", cmd_sim, "run a discrete-event simulation scenario (docs/SIMULATOR.md)"},
    {"fault", cmd_fault, "change the injected faults of a running agent (docs/CHAOS.md)"},
    {"chaos", cmd_chaos,
     "run a fault schedule against a live cluster and check it (docs/CHAOS.md)"},
};
#define COMMAND_COUNT (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
    fprintf(out, "usage: murmur COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "  %-10s %s\n", "help", "show this list");
    fprintf(out, "\n'murmur COMMAND --help' describes one command; 'murmur --version' (or\n"
                 "'murmur version') prints the version.\n");
}

int main(int argc, char **argv)
{
    /* before any thread or BLAS call: OpenBLAS's kernels for this CPU */
    model_blas_init(NULL, 0);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "help") || !strcmp(name, "--help") || !strcmp(name, "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(name, "--version") || !strcmp(name, "-V"))
        return cmd_version(argc - 1, argv + 1);
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        if (!strcmp(name, commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    /* the nearest command or top-level flag */
    common_nearest n;
    common_nearest_init(&n, name);
    if (name[0] == '-') {
        common_nearest_offer(&n, "--help");
        common_nearest_offer(&n, "--version");
    } else {
        common_nearest_offer(&n, "help");
        for (size_t i = 0; i < COMMAND_COUNT; i++)
            common_nearest_offer(&n, commands[i].name);
    }
    const char *best = common_nearest_best(&n);
    fprintf(stderr, "murmur: unknown %s '%s'", name[0] == '-' ? "option" : "command", name);
    if (best)
        fprintf(stderr, "; did you mean '%s'?", best);
    fprintf(stderr, "\n\n");
    usage(stderr);
    return 2;
}
