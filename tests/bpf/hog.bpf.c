/* hog.bpf.c (tests only): a second sock_ops program that takes all the TCP option space
 * left on SYN-ACKs, so that smcr's echo reserve fails. Attached to a child cgroup, it runs
 * before smcr's program; test_bpf_tfo_cookie checks that the server then never believes
 * it echoed (rule R4) and that both ends agree on plain TCP. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char _license[] SEC("license") = "Dual BSD/GPL";

SEC("sockops")
int smcr_test_hog(struct bpf_sock_ops *skops)
{
	switch (skops->op) {
	case BPF_SOCK_OPS_TCP_LISTEN_CB:
		bpf_sock_ops_cb_flags_set(skops, (int)(skops->bpf_sock_ops_cb_flags |
		                                       BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG));
		break;
	case BPF_SOCK_OPS_HDR_OPT_LEN_CB:
		/* SYN-ACKs only: take the largest piece that still fits, i.e. all of it. */
		if ((skops->skb_tcp_flags & 0x12) != 0x12)
			break;
#pragma unroll
		for (int len = 40; len > 0; len -= 1)
			if (bpf_reserve_hdr_opt(skops, (__u32)len, 0) == 0)
				break;
		break;
	default:
		break;
	}
	return 1;
}
