/* stop: see stop.h. */
#include "stop.h"

atomic_int stop_asked;
