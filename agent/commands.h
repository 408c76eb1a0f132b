/* agent/commands — the subcommands of the single `murmur` binary.
 *
 * Each subcommand is `int cmd_NAME(int argc, char **argv)` where argv[0] is
 * the subcommand name; it returns the process exit status (0 success, 1 a
 * runtime failure, 2 a usage error). agent/main.c dispatches on this table.
 */
#ifndef AGENT_COMMANDS_H
#define AGENT_COMMANDS_H

typedef struct agent_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} agent_command;

int cmd_keygen(int argc, char **argv);
int cmd_status(int argc, char **argv); /* agent/cmd_status.c */
int cmd_train(int argc, char **argv);
int cmd_export(int argc, char **argv); /* agent/cmd_export.c */
int cmd_shard(int argc, char **argv);
int cmd_agent(int argc, char **argv);  /* agent/cmd_agent.c */
int cmd_sim(int argc, char **argv);    /* agent/cmd_sim.c */
int cmd_launch(int argc, char **argv); /* agent/cmd_launch.c */
int cmd_bench(int argc, char **argv);  /* agent/cmd_bench.c */
int cmd_fault(int argc, char **argv);  /* agent/cmd_fault.c */
int cmd_chaos(int argc, char **argv);  /* agent/cmd_chaos.c */

#endif
