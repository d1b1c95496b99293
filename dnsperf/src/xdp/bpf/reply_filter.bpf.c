// SPDX-License-Identifier: GPL-2.0
/* The kernel half of xlatperf's AF_XDP layer. It hands the AF_XDP socket only
 * the tester's replies: UDP from the server's address and port to one of the
 * tester's (address, port range) pairs, on the tester's VLAN (or untagged). Every other frame (ARP, ICMP, the
 * client's SSH, anything not understood) goes on to the kernel with XDP_PASS.
 * The pairs are an LPM trie of (address, port prefix) keys, so a reply costs one
 * lookup however many sources and ranges there are. With encap set (xlatperf
 * --encap) the replies are IPv4 inside IPv6 (next header 4) from the BR's
 * address: the outer header is checked and skipped, and the inner one is
 * looked up as above (the keys then hold the CEs' IPv4 addresses, all ports:
 * user space checks the port sets and the outer destination). The loader (program.cpp)
 * sizes the trie, fills it and the config map before it attaches the program. */
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

/* max_entries is set by the loader to the number of keys it writes. */
struct {
    __uint(type, BPF_MAP_TYPE_LPM_TRIE);
    __uint(max_entries, 1);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, struct xlb_key);
    __type(value, __u8);
} xlb_prefixes SEC(".maps");

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

/* One trie lookup: is (dst, port) inside one of the tester's (address, port range) pairs? */
static __always_inline int ours(const __u8 *dst, int n, __be16 port) {
    struct xlb_key key = {};
    if (n == 4) {
        key.prefixlen = 4 * 8 + 16;
        __builtin_memcpy(key.data, dst, 4);
        __builtin_memcpy(key.data + 4, &port, 2);
    } else {
        key.prefixlen = 16 * 8 + 16;
        __builtin_memcpy(key.data, dst, 16);
        __builtin_memcpy(key.data + 16, &port, 2);
    }
    return bpf_map_lookup_elem(&xlb_prefixes, &key) != 0;
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
    if (c->encap) {
        struct ipv6hdr *outer = next;
        if (proto != bpf_htons(ETH_P_IPV6) || (void *)(outer + 1) > end || outer->nexthdr != IPPROTO_IPIP)
            return count(XLB_STAT_PASSED, XDP_PASS);
        __builtin_memcpy(src, &outer->saddr, 16);
        if (!same16(src, c->outer_server, 16)) return count(XLB_STAT_PASSED, XDP_PASS);
        next = outer + 1;
        proto = bpf_htons(ETH_P_IP);
    }
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
        !ours(dst, n, udp->dest))
        return count(XLB_STAT_PASSED, XDP_PASS);
    /* No socket bound to this queue: the reply goes on to the kernel, counted as passed and as unbound
     * (the tester's loss: its query stays unanswered). */
    int action = bpf_redirect_map(&xlb_xsks, ctx->rx_queue_index, XDP_PASS);
    if (action != XDP_REDIRECT) count(XLB_STAT_UNBOUND, action);
    return count(action == XDP_REDIRECT ? XLB_STAT_REDIRECTED : XLB_STAT_PASSED, action);
}

char LICENSE[] SEC("license") = "GPL";
