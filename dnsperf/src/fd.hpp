// fd.hpp - the owner of a file descriptor the tester opens for a moment (a probe socket, a netlink
// socket): closed when it goes out of scope, never copied.
#pragma once

#include <unistd.h>

namespace xlatperf {

struct Fd {
    int fd;
    explicit Fd(int descriptor) : fd(descriptor) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() {
        if (fd >= 0) close(fd);
    }
};

}  // namespace xlatperf
