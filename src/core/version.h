/* version.h - the one place the version of eldr and eldrd is written.
 * `eldr --version`, `eldrd --version`, eldr.version in Lua, the
 * eldr_version of a fitted model and the router snapshot all read it. */
#ifndef ELDR_VERSION_H
#define ELDR_VERSION_H

#define ELDR_VERSION "0.2.0"

#endif
