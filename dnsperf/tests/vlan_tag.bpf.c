// SPDX-License-Identifier: GPL-2.0
/* The server's VLAN end for the --vlan test on a kernel without 802.1Q devices, attached with tc
 * (clsact, direct-action) to the server's veth end. Ingress: a frame tagged with VLAN 100 loses its
 * tag and goes on; UDP that arrives untagged or on another VLAN is dropped (so only tagged queries are
 * answered); anything else untagged (ARP, neighbour discovery) passes. Egress: UDP leaves tagged with
 * VLAN 100, everything else untagged (so the tester's kernel, which has no VLAN device either, still
 * gets its ARP and ND answers). Built twice, one program per object (tc loads an object's first):
 * vlan_untag.bpf.o with -DVLAN_INGRESS, vlan_tag.bpf.o without. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define TEST_VLAN 100

static __always_inline int is_udp(struct __sk_buff *skb) {
    __u8 protocol = 0;
    if (skb->protocol == bpf_htons(ETH_P_IP)) {
        if (bpf_skb_load_bytes(skb, ETH_HLEN + 9, &protocol, 1) != 0) return 0;
    } else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
        if (bpf_skb_load_bytes(skb, ETH_HLEN + 6, &protocol, 1) != 0) return 0;
    }
    return protocol == IPPROTO_UDP;
}

#ifdef VLAN_INGRESS
SEC("tc")
int vlan_untag(struct __sk_buff *skb) {
    if (skb->vlan_present) {
        if ((skb->vlan_tci & 0x0fff) != TEST_VLAN) return TC_ACT_SHOT;
        bpf_skb_vlan_pop(skb);
        return TC_ACT_OK;
    }
    return is_udp(skb) ? TC_ACT_SHOT : TC_ACT_OK;
}
#else
SEC("tc")
int vlan_tag(struct __sk_buff *skb) {
    if (is_udp(skb)) bpf_skb_vlan_push(skb, bpf_htons(ETH_P_8021Q), TEST_VLAN);
    return TC_ACT_OK;
}
#endif

char LICENSE[] SEC("license") = "GPL";
