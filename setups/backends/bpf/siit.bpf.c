// SPDX-License-Identifier: GPL-2.0-only
/*
 * A stateless IP/ICMP translator (SIIT, RFC 7915) as a tc-BPF classifier (cls_bpf, direct action).
 *
 * It sits on the ingress of the inner end of a veth pair that the routes of a translator point to
 * (like tayga's TUN device): every packet that arrives there is to be translated. An IPv4 packet
 * becomes IPv6, an IPv6 packet becomes IPv4; the kernel then routes the result as if it had been
 * received on that interface. Addresses are mapped by explicit address mappings (EAM, RFC 7757:
 * one address to one address) first, then by the RFC 6052 /96 prefix; a PLAT's IPv6 clients without
 * a mapping get an address of a dynamic IPv4 pool (an LRU table, a hash of the client's address
 * picks the pool address). All of it lives in maps, so one object serves every role.
 *
 * UDP, TCP and ICMP echo (request and reply) are translated, their checksums updated incrementally.
 * An IPv4 UDP datagram without a checksum (0, which RFC 768 allows and Knot's XDP mode sends) gets one
 * computed over the whole datagram for IPv6, where UDP needs one (RFC 7915 section 4.5), and is counted.
 * Everything else (fragments, IPv4 options, IPv6 extension headers, other ICMP types, IPv4 UDP without a
 * checksum longer than the sum covers, unmapped addresses, multicast and broadcast) is dropped and
 * counted per reason in `siit_stats`.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

/* Counter indexes of siit_stats; setups/backends/bpf.py names them in the same order. */
enum stat {
	ST_V4_TO_V6,
	ST_V6_TO_V4,
	ST_DROP_FRAGMENT,
	ST_DROP_V4_OPTIONS,
	ST_DROP_V6_EXTENSION,
	ST_DROP_PROTOCOL,
	ST_DROP_ICMP_TYPE,
	ST_DROP_UDP_NO_CHECKSUM,
	ST_DROP_UNMAPPED_SOURCE,
	ST_DROP_UNMAPPED_DESTINATION,
	ST_DROP_POOL_COLLISION,
	ST_DROP_MALFORMED,
	ST_DROP_HELPER_ERROR,
	ST_DROP_NOT_IP,
	ST_DROP_MULTICAST,
	ST_UDP_ZERO_CHECKSUM_COMPUTED, /* translated too; included in ST_V4_TO_V6 */
	ST_MAX,
};

#define CFG_PREFIX 1u /* prefix6 holds an RFC 6052 /96 prefix */
#define CFG_POOL 2u   /* unmapped IPv6 sources get a dynamic pool address */

struct config {
	__u8 prefix6[16]; /* the /96 prefix; its last four bytes are ignored */
	__be32 pool4;     /* dynamic pool: network address */
	__u32 pool_size;  /* number of addresses in the pool (a power of two not needed) */
	__u32 flags;
};

struct v6addr {
	__u8 b[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} siit_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __be32);
	__type(value, struct v6addr);
} siit_eam4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct v6addr);
	__type(value, __be32);
} siit_eam6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct v6addr);
	__type(value, __be32);
} siit_pool6 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __be32);
	__type(value, struct v6addr);
} siit_pool4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ST_MAX);
	__type(key, __u32);
	__type(value, __u64);
} siit_stats SEC(".maps");

#define ETH_LEN 14
#define IP4_LEN 20
#define IP6_LEN 40
#define IP_MF 0x2000
#define IP_DF 0x4000
#define IP_OFFSET 0x1fff
#define PROTO_ICMP 1
#define PROTO_TCP 6
#define PROTO_UDP 17
#define PROTO_ICMP6 58
#define DF_ABOVE 1260 /* RFC 7915 5.1: DF set on translated packets longer than this */
#define UDP_LEN 8
/*
 * A missing IPv4 UDP checksum is computed by summing the datagram in CSUM_CHUNK-byte pieces copied to the
 * stack, at most CSUM_CHUNKS of them: the verifier must see the loop end, and the piece must fit the 512-byte
 * stack beside the rest. CSUM_MAX covers every datagram a 1500-byte MTU carries unfragmented (1480 bytes of
 * UDP); a longer one without a checksum is dropped as before (drop_udp_zero_checksum): it reached the
 * translator over a larger MTU, which no setup of the suite has, and would leave it as an IPv6 packet over
 * 1500 bytes anyway.
 */
#define CSUM_CHUNK 256
#define CSUM_CHUNKS 6
#define CSUM_MAX (CSUM_CHUNK * CSUM_CHUNKS)

static __always_inline int count(__u32 reason, int verdict)
{
	__u64 *n = bpf_map_lookup_elem(&siit_stats, &reason);

	if (n)
		*n += 1;
	return verdict;
}

static __always_inline int drop(__u32 reason)
{
	return count(reason, TC_ACT_SHOT);
}

/* Offset of the checksum inside the transport header, or -1 if the protocol is not translated. */
static __always_inline int csum_offset(__u8 proto)
{
	switch (proto) {
	case PROTO_UDP:
		return 6;
	case PROTO_TCP:
		return 16;
	case PROTO_ICMP:
	case PROTO_ICMP6:
		return 2;
	}
	return -1;
}

/* Fold a 32-bit one's complement sum (as bpf_csum_diff returns it) into 16 bits. */
static __always_inline __u16 fold(__u64 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)sum;
}

/* The first 12 (a /96 prefix) or all 16 bytes of two IPv6 addresses are equal (no memcmp in BPF). */
static __always_inline __u32 word(const __u8 *p, int i)
{
	__u32 w;

	__builtin_memcpy(&w, p + 4 * i, 4);
	return w;
}

static __always_inline int same96(const __u8 *a, const __u8 *b)
{
	return word(a, 0) == word(b, 0) && word(a, 1) == word(b, 1) && word(a, 2) == word(b, 2);
}

static __always_inline int same128(const __u8 *a, const __u8 *b)
{
	return same96(a, b) && word(a, 3) == word(b, 3);
}

static __always_inline int in_prefix(const struct config *cfg, const struct v6addr *a)
{
	return (cfg->flags & CFG_PREFIX) && same96(a->b, cfg->prefix6);
}

static __always_inline void embed(const struct config *cfg, __be32 v4, struct v6addr *out)
{
	__builtin_memcpy(out->b, cfg->prefix6, 12);
	__builtin_memcpy(out->b + 12, &v4, 4);
}

static __always_inline __be32 extract(const struct v6addr *a)
{
	__be32 v4;

	__builtin_memcpy(&v4, a->b + 12, 4);
	return v4;
}

/* IPv4 -> IPv6 address: EAM, else the client behind a dynamic pool address, else the prefix. */
static __always_inline int map4(const struct config *cfg, __be32 v4, struct v6addr *out)
{
	struct v6addr *found = bpf_map_lookup_elem(&siit_eam4, &v4);

	if (!found && (cfg->flags & CFG_POOL) && bpf_ntohl(v4) - bpf_ntohl(cfg->pool4) < cfg->pool_size)
		found = bpf_map_lookup_elem(&siit_pool4, &v4);
	if (found) {
		*out = *found;
		return 0;
	}
	if (!(cfg->flags & CFG_PREFIX))
		return -1;
	embed(cfg, v4, out);
	return 0;
}

/* A dynamic pool address for an IPv6 client (PLAT): kept while the client is recently active. */
static __always_inline int pool_address(const struct config *cfg, struct v6addr *client, __be32 *out)
{
	__be32 *known = bpf_map_lookup_elem(&siit_pool6, client);
	struct v6addr *holder;
	__be32 candidate;

	if (known) {
		*out = *known;
		return 0;
	}
	if (!cfg->pool_size)
		return -1;
	candidate = bpf_htonl(bpf_ntohl(cfg->pool4) +
			      (__u32)bpf_csum_diff(0, 0, (__be32 *)client->b, 16, 0) % cfg->pool_size);
	if (bpf_map_update_elem(&siit_pool4, &candidate, client, BPF_NOEXIST) != 0) {
		holder = bpf_map_lookup_elem(&siit_pool4, &candidate);
		if (!holder || !same128(holder->b, client->b))
			return -2;
	}
	bpf_map_update_elem(&siit_pool6, client, &candidate, BPF_ANY);
	*out = candidate;
	return 0;
}

/* IPv6 -> IPv4 source address: EAM, else the prefix, else (PLAT) the dynamic pool. */
static __always_inline int map6_source(const struct config *cfg, struct v6addr *a, __be32 *out)
{
	__be32 *found = bpf_map_lookup_elem(&siit_eam6, a);

	if (found) {
		*out = *found;
		return 0;
	}
	if (in_prefix(cfg, a)) {
		*out = extract(a);
		return 0;
	}
	if (cfg->flags & CFG_POOL)
		return pool_address(cfg, a, out);
	return -1;
}

static __always_inline int map6_destination(const struct config *cfg, struct v6addr *a, __be32 *out)
{
	__be32 *found = bpf_map_lookup_elem(&siit_eam6, a);

	if (found) {
		*out = *found;
		return 0;
	}
	if (in_prefix(cfg, a)) {
		*out = extract(a);
		return 0;
	}
	return -1;
}

struct pseudo6 {
	struct v6addr saddr;
	struct v6addr daddr;
	__be32 len;
	__be32 next; /* three zero bytes, then the next header */
};

/*
 * The one's complement sum (32 bits, unfolded, as bpf_csum_diff gives it) of `len` bytes of the packet from
 * `off`, added to `seed`; an odd tail is padded with zero bytes (RFC 768). len must be at most CSUM_MAX.
 * Negative: a helper failed.
 */
static __always_inline __s64 packet_sum(struct __sk_buff *skb, __u32 off, __u32 len, __s64 seed)
{
	__u8 piece[CSUM_CHUNK];
	__u32 i, n;

	for (i = 0; i < CSUM_CHUNKS; i++) {
		if (i * CSUM_CHUNK >= len)
			break;
		n = len - i * CSUM_CHUNK;
		if (n < CSUM_CHUNK)
			__builtin_memset(piece, 0, sizeof(piece)); /* the zero padding of a short last piece */
		else
			n = CSUM_CHUNK;
		/* n is already 1..CSUM_CHUNK; the mask (kept by the empty asm) shows the verifier so. */
		asm volatile("" : "+r"(n));
		n = ((n - 1) & (CSUM_CHUNK - 1)) + 1;
		if (bpf_skb_load_bytes(skb, off + i * CSUM_CHUNK, piece, n) != 0)
			return -1;
		seed = bpf_csum_diff(0, 0, (__be32 *)piece, CSUM_CHUNK, (__wsum)seed);
		if (seed < 0)
			return seed;
	}
	return seed;
}

/*
 * The UDP checksum of an IPv4 datagram that has none, for its IPv6 form (RFC 7915 section 4.5): the
 * datagram (its checksum field is 0, so it adds nothing) over the IPv6 pseudo-header `ph` (addresses
 * already mapped). 0: `*check` holds it (never 0: a computed 0 is sent as 0xffff, RFC 768); 1: the
 * datagram is longer than CSUM_MAX; -1: malformed length; -2: a helper failed.
 */
static __always_inline int zero_checksum_fill(struct __sk_buff *skb, const struct iphdr *ip,
					      struct pseudo6 *ph, __u16 *check)
{
	const struct udphdr *udp = (const void *)ip + IP4_LEN;
	__u32 length = bpf_ntohs(udp->len);
	__s64 sum;

	if (length < UDP_LEN || length > (__u32)bpf_ntohs(ip->tot_len) - IP4_LEN)
		return -1;
	if (length > CSUM_MAX)
		return 1;
	ph->len = bpf_htonl(length);
	ph->next = bpf_htonl(PROTO_UDP);
	sum = bpf_csum_diff(0, 0, (__be32 *)ph, sizeof(*ph), 0);
	if (sum < 0)
		return -2;
	sum = packet_sum(skb, ETH_LEN + IP4_LEN, length, sum);
	if (sum < 0)
		return -2;
	*check = (__u16)~fold((__u64)sum);
	if (*check == 0)
		*check = 0xffff;
	return 0;
}

static __always_inline int v4_to_v6(struct __sk_buff *skb, const struct config *cfg)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct iphdr *ip = data + ETH_LEN;
	struct ipv6hdr ip6 = {};
	struct pseudo6 ph = {};
	__u32 old_type = 0, new_type = 0;
	__be16 proto6 = bpf_htons(ETH_P_IPV6);
	__be32 addrs4[2];
	__u16 new_check = 0;
	__s64 diff;
	__u8 type;
	int off, zero_checksum;

	if ((void *)(ip + 1) > end)
		return drop(ST_DROP_MALFORMED);
	if ((bpf_ntohl(ip->daddr) >> 28) == 0xe || ip->daddr == 0xffffffff)
		return drop(ST_DROP_MULTICAST);
	if (ip->ihl != 5)
		return drop(ip->ihl < 5 ? ST_DROP_MALFORMED : ST_DROP_V4_OPTIONS);
	if (ip->frag_off & bpf_htons(IP_MF | IP_OFFSET))
		return drop(ST_DROP_FRAGMENT);
	off = csum_offset(ip->protocol);
	if (off < 0 || ip->protocol == PROTO_ICMP6)
		return drop(ST_DROP_PROTOCOL);
	if ((void *)ip + IP4_LEN + off + 2 > end)
		return drop(ST_DROP_MALFORMED);
	zero_checksum = ip->protocol == PROTO_UDP && *(__u16 *)((void *)ip + IP4_LEN + 6) == 0;
	if (ip->protocol == PROTO_ICMP) {
		type = *(__u8 *)((void *)ip + IP4_LEN);
		if (type != 8 && type != 0)
			return drop(ST_DROP_ICMP_TYPE);
		old_type = type;
		new_type = type == 8 ? 128 : 129;
	}
	if (map4(cfg, ip->saddr, &ph.saddr) != 0)
		return drop(ST_DROP_UNMAPPED_SOURCE);
	if (map4(cfg, ip->daddr, &ph.daddr) != 0)
		return drop(ST_DROP_UNMAPPED_DESTINATION);
	if (zero_checksum) {
		switch (zero_checksum_fill(skb, ip, &ph, &new_check)) {
		case 0:
			break;
		case 1:
			return drop(ST_DROP_UDP_NO_CHECKSUM);
		case -1:
			return drop(ST_DROP_MALFORMED);
		default:
			return drop(ST_DROP_HELPER_ERROR);
		}
	}

	ip6.version = 6;
	ip6.priority = ip->tos >> 4;
	ip6.flow_lbl[0] = (__u8)(ip->tos << 4);
	ip6.payload_len = bpf_htons(bpf_ntohs(ip->tot_len) - IP4_LEN);
	ip6.nexthdr = ip->protocol == PROTO_ICMP ? PROTO_ICMP6 : ip->protocol;
	ip6.hop_limit = ip->ttl;
	__builtin_memcpy(&ip6.saddr, &ph.saddr, 16);
	__builtin_memcpy(&ip6.daddr, &ph.daddr, 16);

	addrs4[0] = ip->saddr;
	addrs4[1] = ip->daddr;
	if (ip->protocol == PROTO_ICMP) {
		/* ICMPv6 adds the pseudo-header that ICMPv4 lacks, and the type changes. */
		ph.len = bpf_htonl(bpf_ntohs(ip6.payload_len));
		ph.next = bpf_htonl(PROTO_ICMP6);
		old_type = bpf_htonl(old_type << 24);
		new_type = bpf_htonl(new_type << 24);
		diff = bpf_csum_diff(0, 0, (__be32 *)&ph, sizeof(ph), 0);
		diff = bpf_csum_diff(&old_type, 4, &new_type, 4, (__wsum)diff);
	} else {
		/* The pseudo-headers differ only in the addresses (length and protocol sum alike). */
		diff = bpf_csum_diff(addrs4, 8, (__be32 *)&ph, 32, 0);
	}
	if (diff < 0)
		return drop(ST_DROP_HELPER_ERROR);

	if (bpf_skb_change_proto(skb, proto6, 0) != 0)
		return drop(ST_DROP_HELPER_ERROR);
	if (bpf_skb_store_bytes(skb, 12, &proto6, 2, 0) != 0 ||
	    bpf_skb_store_bytes(skb, ETH_LEN, &ip6, IP6_LEN, 0) != 0)
		return drop(ST_DROP_HELPER_ERROR);
	if (new_type) {
		type = (__u8)(bpf_ntohl(new_type) >> 24);
		if (bpf_skb_store_bytes(skb, ETH_LEN + IP6_LEN, &type, 1, 0) != 0)
			return drop(ST_DROP_HELPER_ERROR);
		if (bpf_l4_csum_replace(skb, ETH_LEN + IP6_LEN + off, 0, (__u32)diff, 0) != 0)
			return drop(ST_DROP_HELPER_ERROR);
	} else if (zero_checksum) {
		if (bpf_skb_store_bytes(skb, ETH_LEN + IP6_LEN + off, &new_check, 2, 0) != 0)
			return drop(ST_DROP_HELPER_ERROR);
		count(ST_UDP_ZERO_CHECKSUM_COMPUTED, 0);
	} else if (bpf_l4_csum_replace(skb, ETH_LEN + IP6_LEN + off, 0, (__u32)diff,
				       BPF_F_PSEUDO_HDR |
					       (ip6.nexthdr == PROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0)) != 0) {
		return drop(ST_DROP_HELPER_ERROR);
	}
	return count(ST_V4_TO_V6, TC_ACT_OK);
}

static __always_inline int v6_to_v4(struct __sk_buff *skb, const struct config *cfg)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ipv6hdr *ip6 = data + ETH_LEN;
	struct iphdr ip = {};
	struct pseudo6 ph = {};
	__u32 old_type = 0, new_type = 0;
	__be16 proto4 = bpf_htons(ETH_P_IP);
	__be32 addrs4[2];
	__u16 total;
	__s64 diff;
	__u8 type, proto;
	int off;

	if ((void *)(ip6 + 1) > end)
		return drop(ST_DROP_MALFORMED);
	if (ip6->daddr.in6_u.u6_addr8[0] == 0xff)
		return drop(ST_DROP_MULTICAST);
	proto = ip6->nexthdr;
	if (proto == 44)
		return drop(ST_DROP_FRAGMENT);
	off = csum_offset(proto);
	if (off < 0 || proto == PROTO_ICMP) {
		switch (proto) {
		case 0:  /* hop-by-hop options */
		case 43: /* routing */
		case 60: /* destination options */
			return drop(ST_DROP_V6_EXTENSION);
		}
		return drop(ST_DROP_PROTOCOL);
	}
	if ((void *)ip6 + IP6_LEN + off + 2 > end)
		return drop(ST_DROP_MALFORMED);
	if (proto == PROTO_ICMP6) {
		type = *(__u8 *)((void *)ip6 + IP6_LEN);
		if (type != 128 && type != 129)
			return drop(ST_DROP_ICMP_TYPE);
		old_type = type;
		new_type = type == 128 ? 8 : 0;
	}
	__builtin_memcpy(&ph.saddr, &ip6->saddr, 16);
	__builtin_memcpy(&ph.daddr, &ip6->daddr, 16);
	switch (map6_source(cfg, &ph.saddr, &addrs4[0])) {
	case 0:
		break;
	case -2:
		return drop(ST_DROP_POOL_COLLISION);
	default:
		return drop(ST_DROP_UNMAPPED_SOURCE);
	}
	if (map6_destination(cfg, &ph.daddr, &addrs4[1]) != 0)
		return drop(ST_DROP_UNMAPPED_DESTINATION);

	total = bpf_ntohs(ip6->payload_len) + IP4_LEN;
	ip.version = 4;
	ip.ihl = 5;
	ip.tos = (__u8)((ip6->priority << 4) | (ip6->flow_lbl[0] >> 4));
	ip.tot_len = bpf_htons(total);
	if (total > DF_ABOVE)
		ip.frag_off = bpf_htons(IP_DF);
	else
		ip.id = (__be16)bpf_get_prandom_u32();
	ip.ttl = ip6->hop_limit;
	ip.protocol = proto == PROTO_ICMP6 ? PROTO_ICMP : proto;
	ip.saddr = addrs4[0];
	ip.daddr = addrs4[1];
	ip.check = (__sum16)~fold((__u32)bpf_csum_diff(0, 0, (__be32 *)&ip, IP4_LEN, 0));

	if (proto == PROTO_ICMP6) {
		/* ICMPv4 has no pseudo-header: take the IPv6 one out, and change the type. */
		ph.len = bpf_htonl(bpf_ntohs(ip6->payload_len));
		ph.next = bpf_htonl(PROTO_ICMP6);
		old_type = bpf_htonl(old_type << 24);
		new_type = bpf_htonl(new_type << 24);
		diff = bpf_csum_diff((__be32 *)&ph, sizeof(ph), 0, 0, 0);
		diff = bpf_csum_diff(&old_type, 4, &new_type, 4, (__wsum)diff);
	} else {
		diff = bpf_csum_diff((__be32 *)&ph, 32, addrs4, 8, 0);
	}
	if (diff < 0)
		return drop(ST_DROP_HELPER_ERROR);

	if (bpf_skb_change_proto(skb, proto4, 0) != 0)
		return drop(ST_DROP_HELPER_ERROR);
	if (bpf_skb_store_bytes(skb, 12, &proto4, 2, 0) != 0 ||
	    bpf_skb_store_bytes(skb, ETH_LEN, &ip, IP4_LEN, 0) != 0)
		return drop(ST_DROP_HELPER_ERROR);
	if (proto == PROTO_ICMP6) {
		type = (__u8)(bpf_ntohl(new_type) >> 24);
		if (bpf_skb_store_bytes(skb, ETH_LEN + IP4_LEN, &type, 1, 0) != 0)
			return drop(ST_DROP_HELPER_ERROR);
		if (bpf_l4_csum_replace(skb, ETH_LEN + IP4_LEN + off, 0, (__u32)diff, 0) != 0)
			return drop(ST_DROP_HELPER_ERROR);
	} else if (bpf_l4_csum_replace(skb, ETH_LEN + IP4_LEN + off, 0, (__u32)diff,
				       BPF_F_PSEUDO_HDR |
					       (proto == PROTO_UDP ? BPF_F_MARK_MANGLED_0 : 0)) != 0) {
		return drop(ST_DROP_HELPER_ERROR);
	}
	return count(ST_V6_TO_V4, TC_ACT_OK);
}

SEC("tc")
int siit(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&siit_config, &zero);

	if (!cfg)
		return drop(ST_DROP_HELPER_ERROR);
	if (skb->protocol == bpf_htons(ETH_P_IP))
		return v4_to_v6(skb, cfg);
	if (skb->protocol == bpf_htons(ETH_P_IPV6))
		return v6_to_v4(skb, cfg);
	return drop(ST_DROP_NOT_IP);
}

char LICENSE[] SEC("license") = "GPL";
