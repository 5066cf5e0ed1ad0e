/* main.c - `eldr`: dispatch to the subcommands (see cli.h). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "version.h"

int cmd_gen(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_rho(int argc, char **argv);
int cmd_fit(int argc, char **argv);
int cmd_model(int argc, char **argv);
int cmd_costfit(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_advise(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_repl(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_dash(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_capture(int argc, char **argv);
int cmd_push(int argc, char **argv);

static const struct command {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} commands[] = {
    /* traces */
    {"gen", cmd_gen, "generate a synthetic MoE activation trace"},
    {"import", cmd_import, "import a calibration capture (.npz) or JSON lines into a trace"},
    {"capture", cmd_capture, "record a trace from a running vLLM or SGLang engine (routed experts)"},
    {"info", cmd_info, "geometry, counts, labels and validation of a trace or model"},
    /* calibration */
    {"rho", cmd_rho, "signature quality rho, greedy layer selection, variant comparison"},
    {"fit", cmd_fit, "fit the model: IDF, layer mask, balanced spherical K-means"},
    {"model", cmd_model, "export/import a model as the reference centroid JSON"},
    /* what-if */
    {"sim", cmd_sim, "simulate decode routing policies: TPOT, distinct experts, imbalance"},
    {"sweep", cmd_sweep, "grid of simulations over tau, workers and arrival rate"},
    {"advise", cmd_advise, "which tau and K: the grid under several seeds, and a recommendation"},
    {"costfit", cmd_costfit, "fit the step-latency cost model to a measured profile"},
    /* workbench */
    {"dash", cmd_dash, "ncurses dashboard: balance, heatmaps, queues, scatter, rho; live"},
    {"repl", cmd_repl, "interactive Lua 5.4 prompt with the eldr module (readline)"},
    {"run", cmd_run, "run a Lua script with the eldr module: eldr run script.lua [args]"},
    /* the router */
    {"replay", cmd_replay, "drive a running eldrd with a trace: route, finish, latency"},
    {"push", cmd_push, "send a model to a running eldrd, aligned to its workers, after a diff"},
};

#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f,
            "usage: eldr COMMAND [options] | eldr --help | eldr --version\n"
            "\n"
            "eldr: expert-locality-aware decode routing for PD-disaggregated MoE serving.\n"
            "\n"
            "commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f,
            "\n"
            "'eldr COMMAND --help' describes one command. Exit status: 0 success,\n"
            "2 bad input (one line on stderr says what and where), 3 the server does\n"
            "not answer (eldrd: replay, push, dash --attach; the engine: capture),\n"
            "1 other failure. eldr --version: the version.\n"
            "The router daemon is eldrd (eldrd --help). Docs: man eldr, docs/, README.md.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_BADINPUT;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return CLI_OK;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") ||
        !strcmp(argv[1], "version")) {
        printf("eldr %s\n", ELDR_VERSION);
        return CLI_OK;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "eldr: unknown command '%s' (try 'eldr --help')\n", argv[1]);
    return CLI_BADINPUT;
}
