/* The layout the kernel program (bpf/reply_filter.bpf.c) and its loader
 * (program.cpp) share: one C header, so the two sides cannot drift apart.
 * Addresses and ports are in network byte order, as on the wire. */
#ifndef XLATPERF_XDP_FILTER_ABI_H
#define XLATPERF_XDP_FILTER_ABI_H

#include <linux/types.h>

/* The program's name as the kernel keeps it (at most 15 characters): how a
 * later run recognises a program a killed run left attached. */
#define XLB_PROG_NAME "xlb_reply_filt"

/* Bytes of an LPM trie key's data: the address (4 or 16 bytes), the port right after it, padding. */
#define XLB_KEY_DATA 20
/* Most queues (XSK map entries). */
#define XLB_MAX_QUEUES 64

/* Counters of the per-CPU stats map. */
#define XLB_STAT_REDIRECTED 0 /* replies handed to the AF_XDP socket */
#define XLB_STAT_PASSED 1     /* everything else, passed to the kernel */
#define XLB_STAT_UNBOUND 2    /* of the passed: replies to the tester's flows on a queue without a socket */
#define XLB_STAT_COUNT 3

struct xlb_config {
    __u32 family;          /* 4 or 6 */
    __u32 prefix_count;    /* keys of the prefix trie (what the loader wrote) */
    __u8 server[16];       /* IPv4 in the first 4 bytes */
    __u16 server_port;     /* network order */
    __u16 vlan;            /* 802.1Q VLAN ID the replies carry, host order; 0: untagged (or priority-tagged) */
    __u32 owner_pid;       /* the process that attached it (a later run checks it is gone) */
    __u32 encap;           /* 1: replies are IPv4 (family 4) inside IPv6 (next header 4) from outer_server */
    __u8 outer_server[16]; /* encap: the BR's (lwAFTR's) IPv6 address, the replies' outer source */
};

/* A key of the prefix trie (BPF_MAP_TYPE_LPM_TRIE): the tester's address, then the port, both in network
 * order, so an (address, port range) pair is a few (address, port prefix) keys of prefixlen 8 x address
 * bytes + 0..16, and a reply's (destination address, port) is one lookup of prefixlen 8 x bytes + 16. */
struct xlb_key {
    __u32 prefixlen;
    __u8 data[XLB_KEY_DATA];
};

#endif
