// An HTTP server whose requests must arrive whole within a deadline.
//
// cpp-httplib times out each read on its own, so a client that sends a
// byte every few seconds (slow-loris) would hold a worker thread forever,
// and enough of them would stop the server. DeadlineServer reads each
// connection through its own stream that gives a request (line, headers and
// body) a deadline from its first byte: past it the client is answered 408
// and the connection closed, which frees the worker. The clock stops when
// a handler registered through Get or Post starts; from then on the response
// may take as long as it needs (a stream of thousands of tokens). Between
// requests on a kept-alive connection the worker waits at most the
// keep-alive timeout.
#pragma once

#include <httplib.h>

#include <chrono>
#include <string>

namespace kiln {

class DeadlineServer : public httplib::Server {
 public:
  explicit DeadlineServer(std::chrono::milliseconds deadline);

  // httplib's registrations, each handler wrapped to stop its request's
  // clock first (they hide the base class's).
  DeadlineServer& Get(const std::string& pattern, Handler handler);
  DeadlineServer& Post(const std::string& pattern, Handler handler);

 private:
  bool process_and_close_socket(socket_t sock) override;

  std::chrono::milliseconds deadline_;
};

}  // namespace kiln
