// SPDX-License-Identifier: GPL-2.0
/* The kernel half of xlatperf's AF_XDP layer. It hands the AF_XDP socket only
 * the tester's replies: UDP from the server's address and port to one of the
 * tester's (address, port range) pairs, on the tester's VLAN (or untagged). Every other frame (ARP, ICMP, the
 * client's SSH, anything not understood) goes on to the kernel with XDP_PASS.
 * The loader (program.cpp) fills the config and ranges maps before it
 * attaches the program. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "../filter_abi.h"

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct xlb_config);
} xlb_config SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, XLB_MAX_RANGES);
    __type(key, __u32);
    __type(value, struct xlb_range);
} xlb_ranges SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_XSKMAP);
    __uint(max_entries, XLB_MAX_QUEUES);
    __type(key, __u32);
    __type(value, __u32);
} xlb_xsks SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, XLB_STAT_COUNT);
    __type(key, __u32);
    __type(value, __u64);
} xlb_stats SEC(".maps");

struct vlan_tag {
    __be16 tci;
    __be16 proto;
};

static __always_inline int count(__u32 which, int action) {
    __u64 *n = bpf_map_lookup_elem(&xlb_stats, &which);
    if (n) *n += 1;
    return action;
}

static __always_inline int same16(const __u8 *a, const __u8 *b, int n) {
    int diff = 0;
    for (int i = 0; i < 16; i++) {
        if (i < n) diff |= a[i] ^ b[i];
    }
    return diff == 0;
}

static __always_inline int ours(const struct xlb_config *c, const __u8 *dst, int n, __u16 port) {
    for (__u32 i = 0; i < XLB_MAX_RANGES; i++) {
        if (i >= c->range_count) break;
        __u32 key = i;
        const struct xlb_range *r = bpf_map_lookup_elem(&xlb_ranges, &key);
        if (!r) break;
        if (port >= r->first_port && port <= r->last_port && same16(dst, r->address, n)) return 1;
    }
    return 0;
}

SEC("xdp")
int xlb_reply_filt(struct xdp_md *ctx) {
    void *data = (void *)(long)ctx->data;
    void *end = (void *)(long)ctx->data_end;
    __u32 zero = 0;
    const struct xlb_config *c = bpf_map_lookup_elem(&xlb_config, &zero);
    struct ethhdr *eth = data;
    if (!c || (void *)(eth + 1) > end) return XDP_PASS;

    void *next = eth + 1;
    __be16 proto = eth->h_proto;
    __u16 vlan = 0;
    if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD)) {
        struct vlan_tag *tag = next;
        if ((void *)(tag + 1) > end) return count(XLB_STAT_PASSED, XDP_PASS);
        vlan = bpf_ntohs(tag->tci) & 0x0fff;
        proto = tag->proto;
        next = tag + 1;
    }
    /* Only the tester's VLAN (or, untagged, no VLAN): a reply on another is not one of ours. */
    if (vlan != c->vlan) return count(XLB_STAT_PASSED, XDP_PASS);

    __u8 src[16] = {0}, dst[16] = {0};
    int n;
    struct udphdr *udp;
    if (proto == bpf_htons(ETH_P_IP) && c->family == 4) {
        struct iphdr *ip = next;
        if ((void *)(ip + 1) > end || ip->ihl != 5 || ip->protocol != IPPROTO_UDP ||
            (ip->frag_off & bpf_htons(0x3fff)) != 0)
            return count(XLB_STAT_PASSED, XDP_PASS);
        __builtin_memcpy(src, &ip->saddr, 4);
        __builtin_memcpy(dst, &ip->daddr, 4);
        n = 4;
        udp = (void *)(ip + 1);
    } else if (proto == bpf_htons(ETH_P_IPV6) && c->family == 6) {
        struct ipv6hdr *ip6 = next;
        if ((void *)(ip6 + 1) > end || ip6->nexthdr != IPPROTO_UDP) return count(XLB_STAT_PASSED, XDP_PASS);
        __builtin_memcpy(src, &ip6->saddr, 16);
        __builtin_memcpy(dst, &ip6->daddr, 16);
        n = 16;
        udp = (void *)(ip6 + 1);
    } else {
        return count(XLB_STAT_PASSED, XDP_PASS);
    }
    if ((void *)(udp + 1) > end || udp->source != c->server_port || !same16(src, c->server, n) ||
        !ours(c, dst, n, bpf_ntohs(udp->dest)))
        return count(XLB_STAT_PASSED, XDP_PASS);
    /* No socket bound to this queue: the frame goes on to the kernel, counted as passed. */
    int action = bpf_redirect_map(&xlb_xsks, ctx->rx_queue_index, XDP_PASS);
    return count(action == XDP_REDIRECT ? XLB_STAT_REDIRECTED : XLB_STAT_PASSED, action);
}

char LICENSE[] SEC("license") = "GPL";
