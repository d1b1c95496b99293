#pragma once
// Sorting one received datagram into exactly one bucket. A reply counts as
// valid only when it comes from the server's address and port, carries the
// transaction ID of a query still outstanding on that socket, repeats that
// query's question, and has QR=1, RCODE NOERROR, TC=0 and ANCOUNT>0 within the
// timeout. Nothing a peer sends can make this throw.

#include <cstddef>
#include <cstdint>
#include <sys/socket.h>

#include "config.hpp"
#include "query.hpp"
#include "ring.hpp"

namespace xlatperf {

enum class ReplyKind : std::uint8_t {
    valid,       // answered in time
    late,        // matched, but after the timeout (whatever its RCODE)
    rcode,       // matched, in time, RCODE other than NOERROR
    nodata,      // matched, in time, NOERROR with no answer records
    truncated,   // matched, in time, NOERROR with TC=1
    malformed,   // not a well-formed DNS response to our question format
    unexpected,  // no outstanding query of ours matches it (see UnexpectedCause)
    duplicate,   // a second reply to an already answered query
};

enum class UnexpectedCause : std::uint8_t { none, wrong_source, unknown_id, wrong_question };

struct Outcome {
    ReplyKind kind = ReplyKind::malformed;
    UnexpectedCause cause = UnexpectedCause::none;
    std::uint8_t rcode = 0;
    std::int64_t latency_ns = 0;     // set for the matched kinds (valid .. truncated)
    std::int64_t sent_ns = 0;        // send time of the matched query (CLOCK_REALTIME)
    std::uint64_t query_index = 0;
};

struct DnsHeader {
    std::uint16_t id = 0;
    bool qr = false;
    std::uint8_t opcode = 0;
    bool tc = false;
    std::uint8_t rcode = 0;
    std::uint16_t qdcount = 0;
    std::uint16_t ancount = 0;
};

// The fixed 12-byte header; false when the message is shorter.
bool parse_header(const std::uint8_t* message, std::size_t length, DnsHeader& out);

// Same family, address and port (IPv6 scope and flow label ignored).
bool same_endpoint(const sockaddr* a, socklen_t a_length, const SockAddr& b);

class ReplyClassifier {
public:
    ReplyClassifier(const QueryTemplate& query, const Subnet& subnet, const SockAddr& server,
                    std::int64_t timeout_ns)
        : query_(query), subnet_(subnet), server_(server), timeout_ns_(timeout_ns) {}

    // `cut`: the datagram did not fit the receive buffer. `received_ns` is
    // CLOCK_REALTIME of its arrival. Marks the matched query answered.
    Outcome classify(OutstandingRing& ring, const std::uint8_t* message, std::size_t length, bool cut,
                     const sockaddr* source, socklen_t source_length, std::int64_t received_ns) const;

private:
    const QueryTemplate& query_;
    Subnet subnet_;
    SockAddr server_;
    std::int64_t timeout_ns_;
};

// Smallest resource record on the wire: root owner name, type, class, TTL, RDLENGTH.
constexpr std::size_t kMinRecordSize = 11;

}  // namespace xlatperf
