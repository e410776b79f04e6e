// Text helpers of the program drafter, matching Python's str semantics where the reference
// drafter (``cad.selector.program_proposals``) uses them: code points decoded from UTF-8,
// ``str.strip``'s white space, ``str.splitlines``' line boundaries, and the escaping of
// ``</gen>`` inside gen bodies.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cad::drafting {

using CodePoints = std::vector<uint32_t>;

// The code points of valid UTF-8 ``text`` (an invalid byte becomes U+FFFD).
CodePoints decode_utf8(std::string_view text);
// Whether ``text`` is empty or all white space as ``str.isspace`` sees it.
bool blank(const uint32_t* text, size_t size);
// ``text.splitlines(keepends=True)`` as [begin, end) index pairs.
void split_lines_keepends(const CodePoints& text, std::vector<std::pair<size_t, size_t>>& out);
// Whether ``line`` looks like an edit of ``original``: their common prefix and suffix cover
// at least half of the longer one (two blank lines only when equal).
bool resembles(const uint32_t* line, size_t line_size, const uint32_t* original,
               size_t original_size);
// A gen body as written (``<\/gen>`` for ``</gen>``, one backslash more per level) turned
// back into the text it stands for.
std::string unescape_gen_body(std::string_view body);
// Line terminators in ``text`` (CRLF counts once).
int64_t count_line_breaks(std::string_view text);

}  // namespace cad::drafting
