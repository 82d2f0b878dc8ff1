// An HTTP server whose requests must arrive whole within a deadline.
//
// cpp-httplib times out each read on its own, so a client that sends a
// byte every few seconds (slow-loris) would hold a worker thread forever,
// and enough of them would stop the server. DeadlineServer reads each
// connection through its own stream that gives a request (line, headers and
// body) a deadline from its first byte: past it the client is answered 408
// and the connection closed, which frees the worker. A handler calls
// `request_read()` first; from then on the response may take as long as it
// needs (a stream of thousands of tokens). Between requests on a kept-alive
// connection the worker waits at most the keep-alive timeout.
#pragma once

#include <httplib.h>

#include <chrono>

namespace kiln {

class DeadlineServer : public httplib::Server {
 public:
  explicit DeadlineServer(std::chrono::milliseconds deadline);

  // The calling worker's request has been read: stop its clock.
  static void request_read();

 private:
  bool process_and_close_socket(socket_t sock) override;

  std::chrono::milliseconds deadline_;
};

}  // namespace kiln
