// Include Boost.Process v2 through this header only. With BOOST_PROCESS_USE_STD_FS, Boost
// 1.81's headers use boost::optional, boost::io::quoted and boost's type traits (unqualified,
// inside namespace boost) without including them; this supplies them first, so the order of
// the includes below matters and clang-format must not sort them.
//
// Boost.Process only forks and execs here. Its process handle waits on a pidfd chosen at build
// time, and before Linux 5.3 its constructor throws ("assign: Bad file descriptor") with the
// child already running. So its pidfd is switched off; ChildExits decides at run time.
#pragma once

#ifndef BOOST_PROCESS_V2_DISABLE_PIDFD_OPEN
#define BOOST_PROCESS_V2_DISABLE_PIDFD_OPEN 1
#endif

// clang-format off
#include <boost/io/quoted.hpp>
#include <boost/optional.hpp>
#include <boost/type_traits/conditional.hpp>
#include <boost/type_traits/decay.hpp>
#include <boost/type_traits/is_constructible.hpp>
#include <boost/type_traits/is_same.hpp>
#include <boost/type_traits/remove_pointer.hpp>

#include <boost/process/v2/environment.hpp>
#include <boost/process/v2/process.hpp>
#include <boost/process/v2/start_dir.hpp>
#include <boost/process/v2/stdio.hpp>
#include <boost/process/v2/posix/fork_and_forget_launcher.hpp>
// clang-format on
