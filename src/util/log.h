/* log.h: leveled logging to stderr, chosen by SMCR_LOG=error|warn|info|debug (default warn).
 *
 * Lines look like "smcr[pid] warn clc: message". Errors caused by a peer go through
 * SMCR_LOG_RL, which lets at most SMCR_LOG_RL_BURST lines per call site through in any
 * one-second window and then reports how many it suppressed: a hostile peer cannot
 * flood the program's stderr. Thread-safe: the level is read once (atomically) and
 * each line is written with one write(2). */
#ifndef SMCR_UTIL_LOG_H
#define SMCR_UTIL_LOG_H

#include <stdatomic.h>
#include <stdint.h>

enum smcr_log_level {
	SMCR_LOG_ERROR = 0,
	SMCR_LOG_WARN = 1,
	SMCR_LOG_INFO = 2,
	SMCR_LOG_DEBUG = 3,
};

/* Current level (parses SMCR_LOG on first use). */
enum smcr_log_level smcr_log_level(void);
/* Overrides the level (tests, tools). */
void smcr_log_set_level(enum smcr_log_level lvl);
/* Parses "error", "warn", "info", "debug" (or 0..3); returns -1 if unknown. */
int smcr_log_parse_level(const char *s);

void smcr_log_write(enum smcr_log_level lvl, const char *unit, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Per-call-site rate limit state. Written and read by any thread, only through atomics. */
struct smcr_ratelimit {
	_Atomic uint64_t window_start_ns;	/* start of the current 1 s window */
	_Atomic uint32_t in_window;		/* lines counted in this window */
	_Atomic uint32_t suppressed;		/* lines dropped since the last one printed */
};
#define SMCR_LOG_RL_BURST 5

/* Returns nonzero when a line may be printed now; *suppressed gets the number dropped
 * since the last printed line. */
int smcr_ratelimit_ok(struct smcr_ratelimit *rl, uint32_t *suppressed);

#define SMCR_LOG(lvl, unit, ...)                                                        \
	do {                                                                            \
		if ((lvl) <= smcr_log_level())                                          \
			smcr_log_write((lvl), (unit), __VA_ARGS__);                     \
	} while (0)

#define LOG_ERR(unit, ...) SMCR_LOG(SMCR_LOG_ERROR, unit, __VA_ARGS__)
#define LOG_WARN(unit, ...) SMCR_LOG(SMCR_LOG_WARN, unit, __VA_ARGS__)
#define LOG_INFO(unit, ...) SMCR_LOG(SMCR_LOG_INFO, unit, __VA_ARGS__)
#define LOG_DBG(unit, ...) SMCR_LOG(SMCR_LOG_DEBUG, unit, __VA_ARGS__)

/* Rate-limited: for anything a peer can trigger repeatedly. */
#define SMCR_LOG_RL(lvl, unit, ...)                                                     \
	do {                                                                            \
		static struct smcr_ratelimit smcr_rl_;                                  \
		uint32_t smcr_sup_;                                                     \
		if ((lvl) <= smcr_log_level() && smcr_ratelimit_ok(&smcr_rl_, &smcr_sup_)) { \
			if (smcr_sup_)                                                  \
				smcr_log_write((lvl), (unit), "(%u similar lines suppressed)", \
					       (unsigned)smcr_sup_);                    \
			smcr_log_write((lvl), (unit), __VA_ARGS__);                     \
		}                                                                       \
	} while (0)

#endif
