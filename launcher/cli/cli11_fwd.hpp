// CLI11's classes by name only: headers that hold option pointers need no CLI11 include.
#pragma once

namespace CLI {
class App;
class Option;
class ParseError;
}  // namespace CLI
