/* murmur — decentralized training without a coordinator.
 * One binary; the first argument picks the subcommand (agent/commands.h). */
#include "agent/commands.h"

#include <cblas.h>
#include <nng/nng.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#define MURMUR_VERSION "0.1.0"

static int cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("murmur %s\nlibsodium %s\nnng %s\nopenblas %s\nzlib %s\n", MURMUR_VERSION,
           sodium_version_string(), nng_version(), openblas_get_config(), zlibVersion());
    return 0;
}

static const agent_command commands[] = {
    {"version", cmd_version, "print the version of murmur and of the libraries it uses"},
    {"keygen", cmd_keygen, "create an agent key pair or a cluster network key"},
    {"status", cmd_status, "show a running agent's state (GET /status from HOST:PORT)"},
    {"train", cmd_train, "train a model on one machine (Fashion-MNIST, IDX, CSV or shards)"},
    {"shard", cmd_shard, "split a data set into content-addressed shard files"},
    {"agent", cmd_agent, "run an agent: join peers, train on shards, mix models"},
    {"sim", cmd_sim, "run a discrete-event simulation scenario (docs/SIMULATOR.md)"},
};
#define COMMAND_COUNT (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
    fprintf(out, "usage: murmur COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "  %-10s %s\n", "help", "show this list");
    fprintf(out, "\n'murmur COMMAND --help' describes one command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "help") || !strcmp(name, "--help") || !strcmp(name, "-h")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        if (!strcmp(name, commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "murmur: unknown command '%s'\n\n", name);
    usage(stderr);
    return 2;
}
