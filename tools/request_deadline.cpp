#include "tools/request_deadline.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace kiln {

namespace {

using Clock = std::chrono::steady_clock;

// One request's stream over the connection's socket, read through a small
// buffer (httplib reads request lines a byte at a time).
class DeadlineStream : public httplib::Stream {
 public:
  DeadlineStream(socket_t sock, Clock::time_point due, std::chrono::milliseconds read_timeout,
                 std::chrono::milliseconds write_timeout)
      : sock_(sock), due_(due), read_timeout_(read_timeout), write_timeout_(write_timeout) {}

  void stop_clock() { due_ = Clock::time_point::max(); }
  bool expired() const { return expired_; }
  bool wrote() const { return wrote_; }

  bool is_readable() const override { return begin_ < end_ || wait(POLLIN, read_limit()); }
  bool is_writable() const override { return !expired_ && wait(POLLOUT, write_timeout_); }

  ssize_t read(char* ptr, size_t size) override {
    if (begin_ == end_) {
      if (!wait(POLLIN, read_limit())) {
        expired_ = expired_ || Clock::now() >= due_;
        return -1;
      }
      ssize_t n;
      do n = ::recv(sock_, buf_, sizeof(buf_), 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return n;
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, end_ - begin_);
    std::memcpy(ptr, buf_ + begin_, n);
    begin_ += n;
    return static_cast<ssize_t>(n);
  }

  // Nothing of httplib's goes out once the deadline has passed: the server
  // answers 408 itself.
  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    wrote_ = wrote_ || n > 0;
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    address(&getpeername, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    address(&getsockname, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  std::chrono::milliseconds read_limit() const {
    // Rounded up, so that a wait that times out has reached the deadline.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(due_ - Clock::now());
    return std::max(std::chrono::milliseconds(0), std::min(left, read_timeout_));
  }

  bool wait(short events, std::chrono::milliseconds limit) const {
    pollfd p{sock_, events, 0};
    int r;
    do r = ::poll(&p, 1, static_cast<int>(limit.count()));
    while (r < 0 && errno == EINTR);
    return r > 0 && (p.revents & (events | POLLHUP | POLLERR));
  }

  void address(int (*get)(int, sockaddr*, socklen_t*), std::string& ip, int& port) const {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    ip.clear();
    port = 0;
    if (get(sock_, reinterpret_cast<sockaddr*>(&a), &len) != 0) return;
    char text[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
      inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
      port = ntohs(in->sin_port);
    } else if (a.ss_family == AF_INET6) {
      const auto* in = reinterpret_cast<const sockaddr_in6*>(&a);
      inet_ntop(AF_INET6, &in->sin6_addr, text, sizeof(text));
      port = ntohs(in->sin6_port);
    }
    ip = text;
  }

  socket_t sock_;
  Clock::time_point due_;
  std::chrono::milliseconds read_timeout_, write_timeout_;
  bool expired_ = false, wrote_ = false;
  char buf_[4096];
  size_t begin_ = 0, end_ = 0;
};

thread_local DeadlineStream* current = nullptr;

// The handler runs once its request has been read whole.
httplib::Server::Handler stopping_clock(httplib::Server::Handler handler) {
  return [handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    if (current) current->stop_clock();
    handler(req, res);
  };
}

// Answers a request that ran out of time (unless part of an answer already
// went out) and closes the connection gently: closing with unread bytes
// would reset it and could lose the answer, so what the client still sends
// is read for a moment.
void answer_timeout(socket_t sock, std::chrono::milliseconds deadline, bool wrote) {
  if (!wrote) {
    const std::string body =
        "{\"error\": {\"message\": \"the request did not arrive whole within " +
        std::to_string(deadline.count()) + " ms\", \"type\": \"timeout\", \"code\": 408}}";
    const std::string reply =
        "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Type: "
        "application/json\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    ::send(sock, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  ::shutdown(sock, SHUT_WR);
  const auto until = Clock::now() + std::chrono::milliseconds(250);
  pollfd p{sock, POLLIN, 0};
  char sink[4096];
  while (::poll(&p, 1, 50) > 0 && ::recv(sock, sink, sizeof(sink), 0) > 0 && Clock::now() < until) {
  }
}

}  // namespace

DeadlineServer::DeadlineServer(std::chrono::milliseconds deadline) : deadline_(deadline) {}

DeadlineServer& DeadlineServer::Get(const std::string& pattern, Handler handler) {
  httplib::Server::Get(pattern, stopping_clock(std::move(handler)));
  return *this;
}

DeadlineServer& DeadlineServer::Post(const std::string& pattern, Handler handler) {
  httplib::Server::Post(pattern, stopping_clock(std::move(handler)));
  return *this;
}

bool DeadlineServer::process_and_close_socket(socket_t sock) {
  using std::chrono::milliseconds;
  const milliseconds write_timeout(write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000);
  const milliseconds keep_alive(keep_alive_timeout_sec_ * 1000);
  bool ok = true;
  for (size_t n = 0; n < keep_alive_max_count_ && ok && is_running(); ++n) {
    // A request's clock starts with its first byte; a connection idle
    // longer than the keep-alive timeout is closed without a word.
    pollfd p{sock, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>((n == 0 ? deadline_ : keep_alive).count())) <= 0) break;
    DeadlineStream strm(sock, Clock::now() + deadline_, deadline_, write_timeout);
    bool closed = false;
    current = &strm;
    ok = process_request(strm, n + 1 == keep_alive_max_count_, closed, nullptr);
    current = nullptr;
    if (strm.expired()) {
      answer_timeout(sock, deadline_, strm.wrote());
      break;
    }
    if (closed) break;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace kiln
