#define VERSION 1
#include "prog.c"
