/* murmur agent — run one agent until SIGINT or SIGTERM; SIGHUP re-reads the
 * network key ring and the allow-list (agent/agent.h). */
#include "agent/commands.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/log.h"

static agent_runtime *running;

static void on_signal(int sig)
{
    if (!running)
        return;
    if (sig == SIGHUP)
        agent_runtime_reload(running); /* re-read the network keys and the allow-list */
    else
        agent_runtime_stop(running);
}

int cmd_agent(int argc, char **argv)
{
    static agent_config cfg;
    int rc = agent_config_main(&cfg, argc, argv);
    if (rc >= 0)
        return rc;
    char err[AGENT_RUNTIME_ERR_MAX] = "";
    agent_runtime *a;
    if (agent_runtime_create(&a, &cfg, err, sizeof err)) {
        fprintf(stderr, "murmur agent: %s\n", err);
        return 1;
    }
    running = a;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    rc = agent_runtime_run(a);
    running = NULL;
    agent_runtime_destroy(a);
    return rc;
}
