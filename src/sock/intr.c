/* intr.c: the per-thread counts of signal handlers run (see intr.h). */
#include "sock/intr.h"

_Thread_local __attribute__((tls_model("initial-exec"))) volatile unsigned sock_intr_runs;
_Thread_local __attribute__((tls_model("initial-exec"))) volatile unsigned sock_intr_norestart;
