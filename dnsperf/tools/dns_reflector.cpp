// dns_reflector: the benchmark responder of dnsperf/bench/encap_bench.py. On one
// interface (an AF_PACKET socket, outgoing frames ignored) it answers every DNS
// query frame — IPv4/UDP to port 53, or the same inside IPv6 (next header 4,
// RFC 2473) — with one AAAA record, swapping the addresses (the outer ones too,
// so an encapsulated reply goes back to the CE that asked: a BR that never gets
// it wrong; the MAP arithmetic is checked elsewhere: test_xlatperf_encap.py).
// Both kinds cost it the same but for the outer header's 40 bytes, so the
// tester's CPU per query can be compared between them at one rate. It is no
// DNS server and no BR: it checks nothing but that the frame is a query.
// Prints one JSON line of its counters on SIGTERM or SIGINT.
#include <arpa/inet.h>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace {

volatile std::sig_atomic_t stop = 0;

constexpr std::size_t kBatch = 64;
constexpr std::size_t kFrame = 2048;
// c00c AAAA IN TTL 60, 16 bytes 2001:db8::53.
constexpr std::uint8_t kAnswer[28] = {0xc0, 0x0c, 0x00, 0x1c, 0x00, 0x01, 0x00, 0x00, 0x00, 0x3c, 0x00, 0x10, 0x20, 0x01,
                                      0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x53};

std::uint16_t get16(const std::uint8_t* p) { return static_cast<std::uint16_t>((p[0] << 8) | p[1]); }
void put16(std::uint8_t* p, unsigned v) {
    p[0] = static_cast<std::uint8_t>(v >> 8);
    p[1] = static_cast<std::uint8_t>(v);
}

std::uint32_t sum16(const std::uint8_t* p, std::size_t n) {
    std::uint32_t s = 0;
    for (std::size_t i = 0; i + 1 < n; i += 2) s += get16(p + i);
    if (n & 1u) s += static_cast<std::uint32_t>(p[n - 1]) << 8;
    return s;
}

std::uint16_t fold(std::uint32_t s) {
    while (s >> 16) s = (s & 0xffffu) + (s >> 16);
    return static_cast<std::uint16_t>(~s & 0xffffu);
}

// The reply to the query frame `in` (length n) into `out`; its length, 0 when `in` is no query.
std::size_t reply(const std::uint8_t* in, std::size_t n, std::uint8_t* out) {
    if (n < 14 + 20 + 8 + 12) return 0;
    std::size_t l3 = 14;
    const std::uint16_t type = get16(in + 12);
    bool outer = false;
    if (type == 0x86dd) {
        if (n < 54 + 20 + 8 + 12 || in[14 + 6] != 4) return 0;
        outer = true;
        l3 = 54;
    } else if (type != 0x0800) {
        return 0;
    }
    const std::uint8_t* ip = in + l3;
    if (ip[0] != 0x45 || ip[9] != 17) return 0;
    const std::size_t total = get16(ip + 2);
    if (total < 20 + 8 + 12 || l3 + total > n) return 0;
    const std::uint8_t* udp = ip + 20;
    if (get16(udp + 2) != 53) return 0;
    const std::size_t dns = total - 28;
    if (l3 + total + sizeof kAnswer > kFrame) return 0;

    std::memcpy(out, in + 6, 6);
    std::memcpy(out + 6, in, 6);
    put16(out + 12, type);
    if (outer) {
        std::memcpy(out + 14, in + 14, 8);
        put16(out + 14 + 4, static_cast<unsigned>(total + sizeof kAnswer));
        out[14 + 7] = 64;
        std::memcpy(out + 14 + 8, in + 14 + 24, 16);
        std::memcpy(out + 14 + 24, in + 14 + 8, 16);
    }
    std::uint8_t* oip = out + l3;
    std::memcpy(oip, ip, 20);
    put16(oip + 2, static_cast<unsigned>(total + sizeof kAnswer));
    oip[8] = 64;
    std::memcpy(oip + 12, ip + 16, 4);
    std::memcpy(oip + 16, ip + 12, 4);
    put16(oip + 10, 0);
    put16(oip + 10, fold(sum16(oip, 20)));
    std::uint8_t* oudp = oip + 20;
    std::memcpy(oudp, udp + 2, 2);
    std::memcpy(oudp + 2, udp, 2);
    const std::size_t udp_length = 8 + dns + sizeof kAnswer;
    put16(oudp + 4, static_cast<unsigned>(udp_length));
    put16(oudp + 6, 0);
    std::uint8_t* odns = oudp + 8;
    std::memcpy(odns, udp + 8, dns);
    odns[2] |= 0x80;  // QR
    odns[3] |= 0x80;  // RA
    put16(odns + 6, 1);
    std::memcpy(odns + dns, kAnswer, sizeof kAnswer);
    const std::uint32_t pseudo = sum16(oip + 12, 8) + 17 + static_cast<std::uint32_t>(udp_length);
    const std::uint16_t check = fold(pseudo + sum16(oudp, udp_length));
    put16(oudp + 6, check == 0 ? 0xffff : check);
    return l3 + total + sizeof kAnswer;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: dns_reflector INTERFACE\n");
        return 2;
    }
    const unsigned ifindex = if_nametoindex(argv[1]);
    if (ifindex == 0) {
        std::fprintf(stderr, "dns_reflector: no interface %s\n", argv[1]);
        return 2;
    }
    const int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    if (fd < 0) {
        std::perror("dns_reflector: socket (needs root)");
        return 1;
    }
    const int one = 1;
    setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
    const int buffer = 8 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buffer, sizeof buffer);
    timeval tick{0, 200000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tick, sizeof tick);
    sockaddr_ll where{};
    where.sll_family = AF_PACKET;
    where.sll_protocol = htons(ETH_P_ALL);
    where.sll_ifindex = static_cast<int>(ifindex);
    if (bind(fd, reinterpret_cast<sockaddr*>(&where), sizeof where) != 0) {
        std::perror("dns_reflector: bind");
        return 1;
    }
    struct sigaction action{};
    action.sa_handler = [](int) { stop = 1; };
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGINT, &action, nullptr);

    std::vector<std::uint8_t> in(kBatch * kFrame), out(kBatch * kFrame);
    std::vector<iovec> in_iov(kBatch), out_iov(kBatch);
    std::vector<mmsghdr> in_msg(kBatch), out_msg(kBatch);
    for (std::size_t i = 0; i < kBatch; ++i) {
        in_iov[i] = {in.data() + i * kFrame, kFrame};
        in_msg[i].msg_hdr.msg_iov = &in_iov[i];
        in_msg[i].msg_hdr.msg_iovlen = 1;
        out_msg[i].msg_hdr.msg_iov = &out_iov[i];
        out_msg[i].msg_hdr.msg_iovlen = 1;
    }
    std::uint64_t received = 0, answered = 0, ignored = 0, send_failed = 0;
    std::printf("ready\n");
    std::fflush(stdout);
    while (!stop) {
        const int got = recvmmsg(fd, in_msg.data(), kBatch, MSG_WAITFORONE, nullptr);
        if (got <= 0) continue;
        unsigned replies = 0;
        for (int i = 0; i < got; ++i) {
            ++received;
            const std::size_t length = reply(in.data() + static_cast<std::size_t>(i) * kFrame, in_msg[i].msg_len,
                                             out.data() + replies * kFrame);
            if (length == 0) {
                ++ignored;
                continue;
            }
            out_iov[replies] = {out.data() + replies * kFrame, length};
            ++replies;
        }
        unsigned sent = 0;
        while (sent < replies) {
            const int n = sendmmsg(fd, out_msg.data() + sent, replies - sent, 0);
            if (n <= 0) {
                send_failed += replies - sent;
                break;
            }
            sent += static_cast<unsigned>(n);
        }
        answered += sent;
    }
    std::printf("{\"received\": %llu, \"answered\": %llu, \"ignored\": %llu, \"send_failed\": %llu}\n",
                static_cast<unsigned long long>(received), static_cast<unsigned long long>(answered),
                static_cast<unsigned long long>(ignored), static_cast<unsigned long long>(send_failed));
    close(fd);
    return 0;
}
