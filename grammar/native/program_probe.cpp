#include "program_probe.h"

#include <algorithm>

#include "program_text.h"

namespace cad::program {

namespace {

constexpr size_t kMaxHeld = 64;
constexpr std::string_view kGenClose = "</gen>";
constexpr std::string_view kCloseTail = "/gen";

}  // namespace

size_t held_length(std::string_view body) {
    const size_t open = body.rfind('<');
    if (open == std::string_view::npos) return 0;
    if (body.size() > kMaxHeld && open < body.size() - kMaxHeld) return 0;
    size_t end = open + 1;
    while (end < body.size() && body[end] == '\\') ++end;
    const std::string_view rest = body.substr(end);
    if (!rest.empty() && (rest.size() > kCloseTail.size() || kCloseTail.substr(0, rest.size()) != rest)) {
        return 0;
    }
    return body.size() - open;
}

std::optional<Probe> probe(const ProgramMatcher& matcher, std::string_view data, bool cross_ops,
                           uint32_t definite) {
    const Structure& structure = matcher.structure();
    if (!structure.walk(matcher.state(), data.data(), data.size(), cross_ops)) return std::nullopt;
    Probe result{matcher.state(), {}, definite, {}};
    std::string body;
    if (result.state.mode == Mode::Gen) {
        body.assign(matcher.text(), matcher.gen_start(), std::string::npos);
    }
    auto decide = [&](size_t until) {
        if (until > result.definite) {
            std::string_view decided(body);
            decided = decided.substr(result.definite, until - result.definite);
            result.pieces.push_back({false, drafting::unescape_gen_body(decided), Kind::Lines, {}});
        }
        result.definite = static_cast<uint32_t>(until);
    };
    for (const char byte : data) {
        const State before = result.state;
        const Step stepped = *structure.step(before, static_cast<uint8_t>(byte));
        result.state = stepped.state;
        if (before.mode == Mode::Await && result.state.mode == Mode::Gen) {
            body.clear();
            result.definite = 0;
        } else if (before.mode == Mode::Gen) {
            body.push_back(byte);
            if (result.state.mode == Mode::Literal) decide(body.size() - kGenClose.size());
        }
        if (stepped.op_ended && before.literal == LiteralId::CopyTail) {
            result.pieces.push_back({true, {}, before.kind, before.values});
        }
    }
    if (result.state.mode == Mode::Gen) {
        decide(std::max<size_t>(body.size() - held_length(body), result.definite));
        result.held = body.substr(result.definite);
    }
    return result;
}

}  // namespace cad::program
