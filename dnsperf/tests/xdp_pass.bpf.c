// SPDX-License-Identifier: GPL-2.0
/* Someone else's XDP program (it passes everything): the loader must refuse to replace it. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int other_pass(struct xdp_md *ctx) { return XDP_PASS; }

char LICENSE[] SEC("license") = "GPL";
