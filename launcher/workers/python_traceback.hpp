// What a Python worker's traceback says about why it died: the exception's type and the
// innermost frame it was raised in, read from a torchelastic error file's callstack or from
// the worker's stderr. The restart classification compares them between attempts: the same
// exception at the same place twice is the script's, not the node's.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace npu_run {

struct PythonException {
  std::string type;   // "ValueError", "torch.OutOfMemoryError"
  std::string frame;  // "train.py:88 in step"; empty when the traceback had no frame
};

// The last exception `text` shows with its traceback (a "Traceback (most recent call last):"
// block, or the frame-and-caret form of a SyntaxError); none when it shows none.
std::optional<PythonException> last_python_exception(std::string_view text);

// argparse's way of refusing a command line: a "usage: " line, then "<prog>: error: ...".
bool names_usage_error(std::string_view text);

}  // namespace npu_run
