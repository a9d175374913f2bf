/* env.h: numbers from the environment ($SMCR_*), read one way for every setting.
 *
 * docs/CONFIG.md lists the settings. A value that is not a decimal number within the
 * setting's range is ignored, the default applies, and a warning names the setting and
 * the value: a typo should not pass for the default silently, nor become 0 as atoi() made
 * it. The callers read each setting once (at first use or set-up) and keep it, except
 * SMCR_SERVER_WAIT_MS, parsed again when its text changes (sock/engine.c). */
#ifndef SMCR_UTIL_ENV_H
#define SMCR_UTIL_ENV_H

#include <stdbool.h>
#include <stdint.h>

/* true, with *out set, when $name holds a decimal number (digits only, no sign or space)
 * in [lo, hi]; false, *out untouched, when it is unset or empty (silently) or anything
 * else (with a warning). */
bool smcr_env_num(const char *name, uint64_t lo, uint64_t hi, uint64_t *out);

/* $name as a number in [lo, hi], or dflt (smcr_env_num). */
uint64_t smcr_env_num_or(const char *name, uint64_t lo, uint64_t hi, uint64_t dflt);

#endif
