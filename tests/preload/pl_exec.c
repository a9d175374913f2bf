/* pl_exec: exec under the interposer.
 *   pl_exec            the parent: runs "pl_exec child" through execve with an empty
 *                      environment, and checks that the child ran under the interposer
 *                      exactly when SMCR_STICKY=1 (smcr-run --sticky) is set, and that a
 *                      listener passed across the exec still accepts there (in SMC-R
 *                      mode when the child is under the interposer, as the parent's end
 *                      says; TCP when the rules say so for the run without --sticky).
 *   pl_exec child FD   reports (exit status) whether it runs under the interposer and
 *                      whether the inherited listener FD accepts a connection. */
#include "pl_util.h"

#include <sys/wait.h>

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "child")) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		int under = pl_mode(s) >= 0;
		close(s);
		int lfd = atoi(argv[2]);
		int a = accept(lfd, NULL, NULL);
		if (a < 0)
			_exit(10);
		char b[5] = { 0 };
		pl_read_all(a, b, 4);
		if (strcmp(b, "exec"))
			_exit(11);
		char reply[2] = { 'o', (char)('0' + (under ? pl_mode(a) : 0)) };
		pl_write_all(a, reply, 2);
		close(a);
		_exit(under ? 0 : 1);
	}
	pl_need_preload();
	uint16_t port;
	int lfd = pl_listen(&port); /* no FD_CLOEXEC: it goes across the exec */
	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		char fdarg[16];
		snprintf(fdarg, sizeof(fdarg), "%d", lfd);
		char *av[] = { argv[0], "child", fdarg, NULL };
		char *env[] = { NULL };
		execve("/proc/self/exe", av, env);
		_exit(127);
	}
	int c = pl_connect(port);
	pl_write_all(c, "exec", 4);
	char b[2];
	pl_read_all(c, b, 2);
	CHECK(b[0] == 'o');
	/* the child saw the connection in the mode the parent did (0: not under smcr) */
	CHECK(b[1] == (char)('0' + (b[1] == '0' ? 0 : pl_mode(c))));
	CHECK(b[1] == '0' || pl_mode(c) == pl_expect());
	close(c);
	int st;
	CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st));
	const char *sticky = getenv("SMCR_STICKY");
	int want = sticky && sticky[0] == '1' ? 0 : 1;
	if (WEXITSTATUS(st) != want)
		fprintf(stderr, "child exit %d, expected %d\n", WEXITSTATUS(st), want);
	CHECK(WEXITSTATUS(st) == want);
	close(lfd);
	printf("pl_exec: ok (sticky %s)\n", want ? "off" : "on");
	return 0;
}
