/* gpukmmctl — subcommands. Each lives in its own cmd_<name>.c and is listed in
 * the table in main.c. A subcommand returns the process exit code:
 * 0 ok, 1 the thing checked is wrong / the call failed, 2 usage or unreadable input. */
#ifndef GPUKMMCTL_H
#define GPUKMMCTL_H

typedef struct gkctl_cmd {
	const char *name;
	const char *summary;   /* one line for `gpukmmctl --help` */
	int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
} gkctl_cmd;

/* subcommands (one per cmd_<name>.c) */
int gkctl_images(int argc, char **argv);
int gkctl_render(int argc, char **argv);
int gkctl_validate(int argc, char **argv);

#endif
