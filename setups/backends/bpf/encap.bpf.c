// SPDX-License-Identifier: GPL-2.0-only
/*
 * IPv4-in-IPv6 tunnel ends of MAP-E (RFC 7597) and lw4o6 (RFC 7596) as a tc-BPF classifier (cls_bpf,
 * direct action), on the ingress of the inner end of a veth pair that the role's routes point to, as the
 * SIIT (siit.bpf.c) sits: an IPv4 packet arriving there is encapsulated, an IPv6 packet (next header 4)
 * decapsulated; the kernel then routes the result as if received on that interface.
 *
 * Every role is one question: which IPv6 address belongs to the CE side of an IPv4 address and port?
 * Under a MAP rule (F_RULE: a MAP-E BR, or the tester's end playing many CEs) it is the MAP address that
 * RFC 7597 section 5.2 builds from the rule IPv6 prefix, the EA bits (IPv4 suffix, PSID of the port) and
 * the interface ID 0:IPv4:PSID; otherwise it is the entry of (IPv4, PSID) in the binding table
 * `encap_bindings` (the lwAFTR's, sized for the run; a CE or lwB4 holds its own one binding, so that a port
 * outside its set finds none). On the CE side (no F_BR_SIDE) the IPv4 source and source port give the
 * outer source and the outer destination is the BR (`peer6`); on the BR side the IPv4 destination and its
 * port give the outer destination and the outer source is the BR's own address (`local6`). Decapsulation
 * checks the reverse: on the BR side the outer source must be what the inner source and source port give
 * (else: a port outside the CE's port set, or a wrong address, counted), on the CE side the outer source
 * must be the BR and the outer destination what the inner destination and port give.
 *
 * Ports: UDP and TCP ports, the ICMP echo identifier. Fragments, other protocols, IPv4 options, IPv6
 * extension headers and multicast are dropped; every drop is counted per reason in `encap_stats`.
 * Two faults exist for known-answer tests only (F_FAULT_*): a BR that drops packets from odd source ports
 * as if outside the port set, and one that encapsulates replies to odd ports to the next CE.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#ifndef BPF_F_ADJ_ROOM_DECAP_L3_IPV4
#define BPF_F_ADJ_ROOM_DECAP_L3_IPV4 (1ULL << 7) /* Linux 6.3; Debian 12's headers predate it */
#endif

/* Counter indexes of encap_stats; setups/backends/bpf.py names them in the same order (ENCAP_STATS). */
enum stat {
	ST_ENCAPSULATED,
	ST_DECAPSULATED,
	ST_DROP_FRAGMENT,
	ST_DROP_PROTOCOL,
	ST_DROP_MALFORMED,
	ST_DROP_NOT_TUNNEL, /* IPv6 that is not IPv4-in-IPv6 to this tunnel end */
	ST_DROP_UNKNOWN_PEER, /* CE side: outer source is not the BR */
	ST_DROP_OUTSIDE_RULE, /* IPv4 address outside the rule's prefix, or a port the rule excludes */
	ST_DROP_NO_BINDING, /* no binding for (IPv4, PSID): the port is outside every bound set */
	ST_DROP_SOURCE_MISMATCH, /* outer source not the address inner source and port give */
	ST_DROP_DESTINATION_MISMATCH, /* outer destination not the address inner destination and port give */
	ST_DROP_HELPER_ERROR,
	ST_DROP_NOT_IP,
	ST_DROP_MULTICAST,
	ST_FAULT_PORT_DROPPED, /* fault mode: dropped as if outside the port set */
	ST_FAULT_WRONG_CE, /* fault mode: encapsulated to the next CE (also counted encapsulated) */
	ST_MAX,
};

#define F_BR_SIDE 1
#define F_RULE 2
#define F_FAULT_ODD_PORT_DROP 4
#define F_FAULT_WRONG_CE 8

/* Written by setups/backends/bpf.py (encap_config_value): keep the layout in step. */
struct config {
	__u8 local6[16]; /* BR side: its tunnel address */
	__u8 peer6[16]; /* CE side: the BR's tunnel address */
	__u8 rule6[16]; /* MAP rule IPv6 prefix */
	__be32 rule4; /* MAP rule IPv4 prefix */
	__u32 rule4_len;
	__u32 rule6_len;
	__u32 ea_len;
	__u32 psid_len;
	__u32 psid_offset;
	__u32 flags;
};

struct binding_key {
	__be32 ipv4;
	__u32 psid;
};

struct v6addr {
	__u8 a[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} encap_config SEC(".maps");

/* The binding table: replaced at load time by one created for the run's size (bpftool map create). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct binding_key);
	__type(value, struct v6addr);
} encap_bindings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ST_MAX);
	__type(key, __u32);
	__type(value, __u64);
} encap_stats SEC(".maps");

#define ETH_LEN 14
#define IP4_LEN 20
#define IP6_LEN 40
#define IP_MF 0x2000
#define IP_OFFSET 0x1fff
#define PROTO_IPIP 4
#define HOP_LIMIT 64

static __always_inline int count(__u32 reason, int verdict)
{
	__u64 *n = bpf_map_lookup_elem(&encap_stats, &reason);

	if (n)
		*n += 1;
	return verdict;
}

static __always_inline int drop(__u32 reason)
{
	return count(reason, TC_ACT_SHOT);
}

/* The port of the CE side of `ip` (source or destination), or -1 (the stat to drop with in *why). */
static __always_inline int port_of(const struct iphdr *ip, const void *end, int source, __u32 *why)
{
	const __u8 *l4 = (const __u8 *)ip + IP4_LEN;
	__u16 first, second;
	__u8 proto = ip->protocol;

	if (ip->frag_off & bpf_htons(IP_MF | IP_OFFSET)) {
		*why = ST_DROP_FRAGMENT;
		return -1;
	}
	if (proto != IPPROTO_UDP && proto != IPPROTO_TCP && proto != IPPROTO_ICMP) {
		*why = ST_DROP_PROTOCOL;
		return -1;
	}
	/* UDP header, TCP ports, ICMP echo type..identifier: 8 bytes cover each. */
	if ((const void *)(l4 + 8) > end) {
		*why = ST_DROP_MALFORMED;
		return -1;
	}
	first = bpf_ntohs(*(const __be16 *)l4);
	second = bpf_ntohs(*(const __be16 *)(l4 + 2));
	if (proto == IPPROTO_ICMP) {
		if (l4[0] != 8 && l4[0] != 0) {
			*why = ST_DROP_PROTOCOL;
			return -1;
		}
		return bpf_ntohs(*(const __be16 *)(l4 + 4));
	}
	return source ? first : second;
}

/* PSID of `port` (RFC 7597 5.1), or -1 for a port the offset excludes (A = 0: the system ports). */
static __always_inline int psid_of(const struct config *cfg, __u32 port)
{
	__u32 k = cfg->psid_len & 31, a = cfg->psid_offset & 31, m;

	if (a + k > 16)
		return -1;
	m = 16 - a - k;
	if (a > 0 && (port >> (16 - a)) == 0)
		return -1;
	return k == 0 ? 0 : (int)((port >> m) & ((1U << k) - 1));
}

/*
 * The IPv6 address of the CE side of (ipv4, port) into *out; 0, or the stat to drop with. `next`: the next
 * CE's instead (the wrong-CE fault): EA bits + 1 under a rule, the next (IPv4, PSID) in a binding table.
 */
static __always_inline __u32 ce_address(const struct config *cfg, __be32 ipv4, __u32 port, int next,
					struct v6addr *out)
{
	int psid = psid_of(cfg, port);
	__u32 k = cfg->psid_len & 31;

	if (psid < 0)
		return ST_DROP_OUTSIDE_RULE;
	if (next) {
		psid += 1;
		if ((__u32)psid >= (1U << k)) {
			psid = 0;
			ipv4 = bpf_htonl(bpf_ntohl(ipv4) + 1);
		}
	}
	if (cfg->flags & F_RULE) {
		__u32 len4 = cfg->rule4_len & 63, len6 = cfg->rule6_len & 127, ea_len = cfg->ea_len & 63;
		__u32 host = bpf_ntohl(ipv4);
		__u32 mask4 = len4 >= 32 ? 0xffffffff : (len4 == 0 ? 0 : ~((1U << (32 - len4)) - 1));
		__u64 suffix, ea, hi = 0, lo;
		__u32 shift;
		int i;

		if ((host & mask4) != bpf_ntohl(cfg->rule4) || len6 + ea_len > 64)
			return ST_DROP_OUTSIDE_RULE;
		suffix = host & ~mask4;
		ea = (suffix << k) | (__u32)psid;
		for (i = 0; i < 8; i++)
			hi = (hi << 8) | cfg->rule6[i];
		shift = 64 - len6 - ea_len;
		if (ea_len > 0 && shift < 64)
			hi |= ea << shift;
		lo = ((__u64)host << 16) | (__u32)psid;
		for (i = 7; i >= 0; i--) {
			out->a[i] = (__u8)hi;
			out->a[8 + i] = (__u8)lo;
			hi >>= 8;
			lo >>= 8;
		}
		return 0;
	}
	struct binding_key key = {.ipv4 = ipv4, .psid = (__u32)psid};
	struct v6addr *found = bpf_map_lookup_elem(&encap_bindings, &key);

	if (!found)
		return ST_DROP_NO_BINDING;
	__builtin_memcpy(out, found, 16);
	return 0;
}

static __always_inline int same16(const __u8 *a, const __u8 *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;

	return x[0] == y[0] && x[1] == y[1];
}

static __always_inline int encapsulate(struct __sk_buff *skb, const struct config *cfg)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct iphdr *ip = data + ETH_LEN;
	struct ipv6hdr ip6 = {};
	struct v6addr ce = {};
	__be16 proto6 = bpf_htons(ETH_P_IPV6);
	int br = cfg->flags & F_BR_SIDE, port, wrong = 0;
	__u32 why = 0;

	if ((void *)(ip + 1) > end)
		return drop(ST_DROP_MALFORMED);
	if ((bpf_ntohl(ip->daddr) >> 28) == 0xe || ip->daddr == 0xffffffff)
		return drop(ST_DROP_MULTICAST);
	if (ip->ihl != 5)
		return drop(ST_DROP_MALFORMED);
	port = port_of(ip, end, !br, &why);
	if (port < 0)
		return drop(why);
	if (br && (cfg->flags & F_FAULT_WRONG_CE) && (port & 1))
		wrong = 1;
	why = ce_address(cfg, br ? ip->daddr : ip->saddr, (__u32)port, wrong, &ce);
	if (why)
		return drop(why);

	ip6.version = 6;
	ip6.priority = ip->tos >> 4;
	ip6.flow_lbl[0] = (__u8)(ip->tos << 4);
	ip6.payload_len = ip->tot_len;
	ip6.nexthdr = PROTO_IPIP;
	ip6.hop_limit = HOP_LIMIT;
	if (br) {
		__builtin_memcpy(&ip6.saddr, cfg->local6, 16);
		__builtin_memcpy(&ip6.daddr, &ce, 16);
	} else {
		__builtin_memcpy(&ip6.saddr, &ce, 16);
		__builtin_memcpy(&ip6.daddr, cfg->peer6, 16);
	}
	if (bpf_skb_adjust_room(skb, IP6_LEN, BPF_ADJ_ROOM_MAC, BPF_F_ADJ_ROOM_ENCAP_L3_IPV6) != 0)
		return drop(ST_DROP_HELPER_ERROR);
	if (bpf_skb_store_bytes(skb, 12, &proto6, 2, 0) != 0 ||
	    bpf_skb_store_bytes(skb, ETH_LEN, &ip6, IP6_LEN, 0) != 0)
		return drop(ST_DROP_HELPER_ERROR);
	if (wrong)
		count(ST_FAULT_WRONG_CE, 0);
	return count(ST_ENCAPSULATED, TC_ACT_OK);
}

static __always_inline int decapsulate(struct __sk_buff *skb, const struct config *cfg)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ipv6hdr *ip6 = data + ETH_LEN;
	struct iphdr *ip = data + ETH_LEN + IP6_LEN;
	struct v6addr ce = {};
	__be16 proto4 = bpf_htons(ETH_P_IP);
	int br = cfg->flags & F_BR_SIDE, port;
	__u32 why = 0;

	if ((void *)(ip6 + 1) > end)
		return drop(ST_DROP_MALFORMED);
	if (ip6->daddr.in6_u.u6_addr8[0] == 0xff)
		return drop(ST_DROP_MULTICAST);
	if (ip6->nexthdr != PROTO_IPIP)
		return drop(ST_DROP_NOT_TUNNEL);
	if ((void *)(ip + 1) > end || ip->version != 4 || ip->ihl != 5)
		return drop(ST_DROP_MALFORMED);
	port = port_of(ip, end, br, &why);
	if (port < 0)
		return drop(why);
	if (br) {
		if (!same16(ip6->daddr.in6_u.u6_addr8, cfg->local6))
			return drop(ST_DROP_NOT_TUNNEL);
		if ((cfg->flags & F_FAULT_ODD_PORT_DROP) && (port & 1))
			return drop(ST_FAULT_PORT_DROPPED);
		why = ce_address(cfg, ip->saddr, (__u32)port, 0, &ce);
		if (why)
			return drop(why);
		if (!same16(ip6->saddr.in6_u.u6_addr8, ce.a))
			return drop(ST_DROP_SOURCE_MISMATCH);
	} else {
		if (!same16(ip6->saddr.in6_u.u6_addr8, cfg->peer6))
			return drop(ST_DROP_UNKNOWN_PEER);
		why = ce_address(cfg, ip->daddr, (__u32)port, 0, &ce);
		if (why)
			return drop(why);
		if (!same16(ip6->daddr.in6_u.u6_addr8, ce.a))
			return drop(ST_DROP_DESTINATION_MISMATCH);
	}
	if (bpf_skb_adjust_room(skb, -IP6_LEN, BPF_ADJ_ROOM_MAC, BPF_F_ADJ_ROOM_DECAP_L3_IPV4) != 0)
		return drop(ST_DROP_HELPER_ERROR);
	if (bpf_skb_store_bytes(skb, 12, &proto4, 2, 0) != 0)
		return drop(ST_DROP_HELPER_ERROR);
	return count(ST_DECAPSULATED, TC_ACT_OK);
}

SEC("tc")
int encap(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&encap_config, &zero);

	if (!cfg)
		return drop(ST_DROP_HELPER_ERROR);
	if (skb->protocol == bpf_htons(ETH_P_IP))
		return encapsulate(skb, cfg);
	if (skb->protocol == bpf_htons(ETH_P_IPV6))
		return decapsulate(skb, cfg);
	return drop(ST_DROP_NOT_IP);
}

char LICENSE[] SEC("license") = "GPL";
