/* The layout the kernel program (bpf/reply_filter.bpf.c) and its loader
 * (program.cpp) share: one C header, so the two sides cannot drift apart.
 * Addresses and ports are in network byte order, as on the wire. */
#ifndef XLATPERF_XDP_FILTER_ABI_H
#define XLATPERF_XDP_FILTER_ABI_H

#include <linux/types.h>

/* The program's name as the kernel keeps it (at most 15 characters): how a
 * later run recognises a program a killed run left attached. */
#define XLB_PROG_NAME "xlb_reply_filt"

/* Most (tester address, port range) pairs the program checks. */
#define XLB_MAX_RANGES 64
/* Most queues (XSK map entries). */
#define XLB_MAX_QUEUES 64

/* Counters of the per-CPU stats map. */
#define XLB_STAT_REDIRECTED 0 /* replies handed to the AF_XDP socket */
#define XLB_STAT_PASSED 1     /* everything else, passed to the kernel */
#define XLB_STAT_COUNT 2

struct xlb_config {
    __u32 family;          /* 4 or 6 */
    __u32 range_count;     /* entries of the ranges map in use */
    __u8 server[16];       /* IPv4 in the first 4 bytes */
    __u16 server_port;     /* network order */
    __u16 vlan;            /* 802.1Q VLAN ID the replies carry, host order; 0: untagged (or priority-tagged) */
    __u32 owner_pid;       /* the process that attached it (a later run checks it is gone) */
};

struct xlb_range {
    __u8 address[16];      /* tester address (IPv4 in the first 4 bytes) */
    __u16 first_port;      /* host order, inclusive */
    __u16 last_port;
};

#endif
