#pragma once
#include <string>

namespace tb {

// `text` with every control character escaped, so that a message quoting user input stays
// on one line and cannot move a terminal's cursor or change its colours: C0 controls and
// DEL as \n, \r, \t, \f, \v, \b, \a, \e or \xNN, C1 controls (U+0080-U+009F, which some
// terminals take as escape sequences too) as \u0080-\u009f, and backslash doubled only
// where it would otherwise read as one of these escapes. Other UTF-8 is kept as it is.
std::string printable(const std::string& text);

}  // namespace tb
