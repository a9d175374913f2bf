/* log.c: leveled, rate-limited logging (log.h). */
#define _GNU_SOURCE
#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util/clock.h"

/* -1: not yet read from the environment. Any thread may race to initialise it; they all
 * compute the same value, so a plain atomic store is enough. */
static _Atomic int log_level = -1;

static const char *const level_names[] = { "error", "warn", "info", "debug" };

int smcr_log_parse_level(const char *s)
{
	if (!s)
		return -1;
	for (int i = 0; i < 4; i++)
		if (strcasecmp(s, level_names[i]) == 0)
			return i;
	if (strcasecmp(s, "warning") == 0)
		return SMCR_LOG_WARN;
	if (s[0] >= '0' && s[0] <= '3' && s[1] == '\0')
		return s[0] - '0';
	return -1;
}

enum smcr_log_level smcr_log_level(void)
{
	int lvl = atomic_load_explicit(&log_level, memory_order_relaxed);
	if (lvl < 0) {
		lvl = smcr_log_parse_level(getenv("SMCR_LOG"));
		if (lvl < 0)
			lvl = SMCR_LOG_WARN;
		atomic_store_explicit(&log_level, lvl, memory_order_relaxed);
	}
	return (enum smcr_log_level)lvl;
}

void smcr_log_set_level(enum smcr_log_level lvl)
{
	atomic_store_explicit(&log_level, (int)lvl, memory_order_relaxed);
}

void smcr_log_write(enum smcr_log_level lvl, const char *unit, const char *fmt, ...)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "smcr[%d] %s %s: ", (int)getpid(),
			 level_names[lvl <= SMCR_LOG_DEBUG ? lvl : SMCR_LOG_DEBUG], unit);
	if (n < 0)
		return;
	size_t used = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line + used, sizeof(line) - used, fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	used += (size_t)m;
	if (used > sizeof(line) - 2)
		used = sizeof(line) - 2;	/* truncated: keep room for the newline */
	line[used++] = '\n';
	/* One write per line so lines from threads do not interleave. Errors are ignored:
	 * there is nowhere else to report them. */
	ssize_t w = write(STDERR_FILENO, line, used);
	(void)w;
}

int smcr_ratelimit_ok(struct smcr_ratelimit *rl, uint32_t *suppressed)
{
	uint64_t now = smcr_now_ns();
	uint64_t start = atomic_load_explicit(&rl->window_start_ns, memory_order_relaxed);
	*suppressed = 0;
	if (now - start >= SMCR_NS_PER_S) {
		/* One thread wins the new window; others count against it. */
		if (atomic_compare_exchange_strong(&rl->window_start_ns, &start, now))
			atomic_store(&rl->in_window, 0);
	}
	uint32_t n = atomic_fetch_add(&rl->in_window, 1);
	if (n >= SMCR_LOG_RL_BURST) {
		atomic_fetch_add(&rl->suppressed, 1);
		return 0;
	}
	*suppressed = atomic_exchange(&rl->suppressed, 0);
	return 1;
}
