/* frame_file.h - the dashboard's save-frame key (s): the screen as text
 * in a numbered file that never replaces another.
 *
 * The text is the canvas's (canvas_to_string), the very form `eldr dash
 * --frame` writes, so a saved frame and a --frame of the same state at
 * the same size are the same file. It goes to $ELDR_FRAME_DIR when set,
 * else the current directory, as eldr-frame-001.txt, -002, ...: the first
 * free number. The file appears whole or not at all: the text is written
 * to a temporary beside it, synced, and linked to its name (link(2)
 * refuses a name that exists, so a file made meanwhile by anyone else is
 * never overwritten: the next number is tried). */
#ifndef ELDR_FRAME_FILE_H
#define ELDR_FRAME_FILE_H

#include <stddef.h>

#include "canvas.h"

#define FRAME_FILE_MAX 999      /* eldr-frame-999.txt is the last */

/* Save c; path gets the file's name (dir/eldr-frame-NNN.txt). Returns 0,
 * or -1 with err (no directory, no room, all numbers taken). */
int frame_file_save(const canvas_t *c, char *path, size_t pathlen, char *err, size_t errlen);

/* The key: save c and say where on the status line ("frame saved:
 * eldr-frame-002.txt (80x24) in DIR"), or why not. */
void frame_file_key(const canvas_t *c, char *status, size_t n);

/* The directory frames go to: $ELDR_FRAME_DIR, or "." */
const char *frame_file_dir(void);

#endif
