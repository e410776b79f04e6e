#include "program_text.h"

#include <algorithm>

namespace cad::drafting {

CodePoints decode_utf8(std::string_view text) {
    CodePoints out;
    out.reserve(text.size());
    size_t i = 0;
    while (i < text.size()) {
        const auto byte = static_cast<uint8_t>(text[i]);
        int extra = 0;
        uint32_t value = byte;
        if (byte >= 0xF0) {
            extra = 3;
            value = byte & 0x07;
        } else if (byte >= 0xE0) {
            extra = 2;
            value = byte & 0x0F;
        } else if (byte >= 0xC0) {
            extra = 1;
            value = byte & 0x1F;
        } else if (byte >= 0x80) {
            out.push_back(0xFFFD);
            ++i;
            continue;
        }
        if (extra > 0 && i + static_cast<size_t>(extra) >= text.size()) {
            out.push_back(0xFFFD);
            ++i;
            continue;
        }
        for (int k = 1; k <= extra; ++k) {
            value = (value << 6) | (static_cast<uint8_t>(text[i + static_cast<size_t>(k)]) & 0x3F);
        }
        out.push_back(value);
        i += static_cast<size_t>(extra) + 1;
    }
    return out;
}

namespace {

bool is_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_line_boundary(uint32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
           c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
}

}  // namespace

bool blank(const uint32_t* text, size_t size) {
    return std::all_of(text, text + size, is_space);
}

void split_lines_keepends(const CodePoints& text, std::vector<std::pair<size_t, size_t>>& out) {
    out.clear();
    size_t begin = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        if (!is_line_boundary(text[i])) continue;
        size_t end = i + 1;
        if (text[i] == '\r' && end < text.size() && text[end] == '\n') ++end;
        out.emplace_back(begin, end);
        begin = end;
        i = end - 1;
    }
    if (begin < text.size()) out.emplace_back(begin, text.size());
}

bool resembles(const uint32_t* line, size_t line_size, const uint32_t* original,
               size_t original_size) {
    if (blank(line, line_size) || blank(original, original_size)) {
        return line_size == original_size && std::equal(line, line + line_size, original);
    }
    const size_t shorter = std::min(line_size, original_size);
    size_t prefix = 0;
    while (prefix < shorter && line[prefix] == original[prefix]) ++prefix;
    size_t suffix = 0;
    while (suffix < shorter &&
           line[line_size - 1 - suffix] == original[original_size - 1 - suffix]) {
        ++suffix;
    }
    const size_t rest = shorter - prefix;
    return 2 * (prefix + std::min(suffix, rest)) >= std::max(line_size, original_size);
}

std::string unescape_gen_body(std::string_view body) {
    std::string out;
    out.reserve(body.size());
    size_t i = 0;
    while (i < body.size()) {
        if (body[i] == '<' && i + 1 < body.size() && body[i + 1] == '\\') {
            size_t j = i + 1;
            while (j < body.size() && body[j] == '\\') ++j;
            if (body.compare(j, 5, "/gen>") == 0) {
                out.push_back('<');
                out.append(body.substr(i + 2, j - i - 2));
                out.append("/gen>");
                i = j + 5;
                continue;
            }
        }
        out.push_back(body[i]);
        ++i;
    }
    return out;
}

int64_t count_line_breaks(std::string_view text) {
    int64_t count = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\n') {
            ++count;
        } else if (text[i] == '\r') {
            ++count;
            if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
        }
    }
    return count;
}

}  // namespace cad::drafting
