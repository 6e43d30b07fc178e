#define VERSION 2
#include "prog.c"
