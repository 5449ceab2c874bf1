#include "parent_watch.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <fstream>

namespace npu_run {

bool ParentWatch::start(std::function<void()> on_exit) {
  parent_ = getppid();
  std::ifstream comm("/proc/" + std::to_string(parent_) + "/comm");
  std::getline(comm, parent_name_);
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, parent_, 0));
  if (fd < 0) return false;
  descriptor_.assign(fd);
  // The parent may have exited before the pidfd was opened (then it refers to the new parent,
  // init or a subreaper): a changed getppid() tells.
  if (getppid() != parent_) {
    boost::asio::post(descriptor_.get_executor(), std::move(on_exit));
    return true;
  }
  descriptor_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                         [on_exit = std::move(on_exit)](const boost::system::error_code& ec) {
                           if (!ec) on_exit();
                         });
  return true;
}

void ParentWatch::cancel() {
  boost::system::error_code ignored;
  descriptor_.close(ignored);
}

}  // namespace npu_run
