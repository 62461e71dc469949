/* stop: see stop.h. */
#include "stop.h"

volatile sig_atomic_t stop_asked;
