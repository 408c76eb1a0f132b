/* murmur agent — run one agent (the built-in trainer on the agent runtime)
 * until SIGINT or SIGTERM; SIGHUP re-reads the network key ring and the
 * allow-list (agent/agent.h). */
#include "agent/commands.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/log.h"

static murmur_agent *volatile running;
static volatile sig_atomic_t stop_early; /* a signal before the agent was open */

static void on_signal(int sig)
{
    murmur_agent *a = running;
    if (sig == SIGHUP) {
        if (a)
            agent_runtime_reload(a); /* re-read the network keys and the allow-list */
        return;
    }
    stop_early = 1;
    if (a)
        murmur_stop(a);
}

int cmd_agent(int argc, char **argv)
{
    static agent_config cfg;
    int rc = agent_config_main(&cfg, argc, argv);
    if (rc >= 0)
        return rc;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return agent_trainer_run(&cfg, &running, &stop_early);
}
