#pragma once
// Sorting one received datagram into exactly one bucket. A reply counts as
// valid only when it comes from the server's address and port, carries the
// transaction ID of a query still outstanding on that socket, repeats that
// query's question, and has QR=1, RCODE NOERROR, TC=0 and ANCOUNT>0 within the
// timeout. Nothing a peer sends can make this throw.

#include <cstddef>
#include <cstdint>
#include <sys/socket.h>

#include "address.hpp"
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

// Whether a reply whose question spells another 0x20 epoch than its query proves
// that the server rewrote the name's letter case (the reply is unexpected either
// way): it spells an epoch no query with its ID has carried yet on the socket
// (never_sent), or it spells epoch 0 while the ID's epoch-1 query is outstanding
// and epoch 0's query with that ID already had its reply (answered_before: a
// second reply to it would have to arrive 65 536 of the socket's queries later).
// Anything else may be a reply held past the ID's reuse, so it proves nothing.
enum class CaseRewrite : std::uint8_t { none, never_sent, answered_before };
const char* case_rewrite_name(CaseRewrite evidence);

// `sequence`: the socket's query that now holds the reply's ID; `spelled`: the
// epoch the reply's letters spell; `epoch0_answered`: epoch 0's query with that ID
// got a reply (any matched kind).
CaseRewrite case_rewrite_evidence(std::uint64_t sequence, std::uint64_t spelled, unsigned epoch_bits,
                                  bool epoch0_answered);

struct Outcome {
    ReplyKind kind = ReplyKind::malformed;
    UnexpectedCause cause = UnexpectedCause::none;
    std::uint8_t rcode = 0;
    std::int64_t latency_ns = 0;     // set for the matched kinds (valid .. truncated)
    std::int64_t sent_ns = 0;        // send time of the matched query (CLOCK_MONOTONIC)
    std::uint64_t query_index = 0;
    std::uint64_t sequence = 0;      // the socket's query number of the query holding the ID (matched kinds, other_epoch)
    bool other_epoch = false;        // unexpected: the question differs from its query's only in the epoch letters
    std::uint64_t spelled_epoch = 0; // then: the epoch the reply's letters spell
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
    // its arrival on the send times' clock (CLOCK_MONOTONIC). Marks the matched query answered. `Ring` is
    // a socket's OutstandingRing, or anything with its find / mark_answered /
    // Snapshot / Lookup (the AF_XDP layer's per-flow view, xdp/flows.hpp).
    template <class Ring>
    Outcome classify(Ring& ring, const std::uint8_t* message, std::size_t length, bool cut,
                     const sockaddr* source, socklen_t source_length, std::int64_t received_ns) const;

private:
    const QueryTemplate& query_;
    Subnet subnet_;
    SockAddr server_;
    std::int64_t timeout_ns_;
};

// Smallest resource record on the wire: root owner name, type, class, TTL, RDLENGTH.
constexpr std::size_t kMinRecordSize = 11;

template <class Ring>
Outcome ReplyClassifier::classify(Ring& ring, const std::uint8_t* message, std::size_t length,
                                  bool cut, const sockaddr* source, socklen_t source_length,
                                  std::int64_t received_ns) const {
    Outcome out;
    if (!same_endpoint(source, source_length, server_)) {
        out.kind = ReplyKind::unexpected;
        out.cause = UnexpectedCause::wrong_source;
        return out;
    }
    DnsHeader header;
    if (cut || !parse_header(message, length, header) || !header.qr || header.opcode != 0 ||
        header.qdcount > 1) {
        return out;  // malformed
    }
    // Servers may omit the question in an error reply; then only the ID matches it.
    const bool has_question = header.qdcount == 1;
    if (has_question ? length < query_.question_end() : header.rcode == 0) return out;

    typename Ring::Snapshot query;
    const auto found = ring.find(header.id, query);
    if (found == Ring::Lookup::unknown) {
        out.kind = ReplyKind::unexpected;
        out.cause = UnexpectedCause::unknown_id;
        return out;
    }
    // A reply older than the query (to an earlier use of its ID: another epoch in
    // the question's letter case, or received before the query was sent) is not
    // its answer.
    const auto match = has_question ? query_.match_question(message, length, subnet_.address(query.query_index),
                                                            query.sequence() >> 16)
                                    : QueryTemplate::Match::same;
    if (received_ns < query.sent_ns || match == QueryTemplate::Match::other_epoch) {
        out.kind = ReplyKind::unexpected;
        out.cause = UnexpectedCause::unknown_id;
        if (match == QueryTemplate::Match::other_epoch && received_ns >= query.sent_ns) {
            out.other_epoch = true;
            out.sequence = query.sequence();
            out.spelled_epoch = query_.spelled_epoch(message);
        }
        return out;
    }
    if (match == QueryTemplate::Match::different) {
        out.kind = ReplyKind::unexpected;
        out.cause = UnexpectedCause::wrong_question;
        return out;
    }
    out.query_index = query.query_index;
    out.sequence = query.sequence();
    out.sent_ns = query.sent_ns;
    if (found == Ring::Lookup::answered) {
        out.kind = ReplyKind::duplicate;
        return out;
    }

    ReplyKind kind = ReplyKind::valid;
    if (header.rcode != 0) {
        kind = ReplyKind::rcode;
    } else if (header.tc) {
        kind = ReplyKind::truncated;
    } else if (header.ancount == 0) {
        kind = ReplyKind::nodata;
    } else if (length - query_.question_end() < std::size_t{header.ancount} * kMinRecordSize) {
        return out;  // malformed: claims answers it cannot hold; the query stays outstanding
    }
    if (!ring.mark_answered(query)) {
        out.kind = ReplyKind::unexpected;
        out.cause = UnexpectedCause::unknown_id;
        return out;
    }
    out.rcode = header.rcode;
    // From when the query left within its send call, once the sender knows it (and it
    // is not after the reply, which would prove the interpolation wrong); else from
    // the clock read before the call.
    const bool left_known = query.left_ns > 0 && query.left_ns <= received_ns;
    out.latency_ns = received_ns - (left_known ? query.left_ns : query.sent_ns);
    out.kind = out.latency_ns > timeout_ns_ ? ReplyKind::late : kind;
    return out;
}


}  // namespace xlatperf
