/* intr.c: the per-thread counts of signal handlers run (see intr.h). */
#include "sock/intr.h"

_Thread_local SOCK_INTR_TLS volatile unsigned sock_intr_runs;
_Thread_local SOCK_INTR_TLS volatile unsigned sock_intr_norestart;
