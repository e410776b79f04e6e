// The path of a created file: the characters the resolver's ``path_problem`` allows, at most
// kMaxPathChars of them, and none a program may not create.
#include <algorithm>
#include <stdexcept>

#include "multi_detail.h"
#include "multi_states.h"
#include "utf8.h"

namespace cad::program {

namespace {

bool forbidden_path_byte(uint8_t byte) {
    return byte < 0x20 || byte == 0x7F || byte == '"' || byte == '<' || byte == '>' ||
           byte == '\\';
}

}  // namespace

uint64_t path_hash(const std::string& path) {
    uint64_t hash = kPathHashSeed;
    for (const char c : path) hash = path_hash_step(hash, static_cast<uint8_t>(c));
    return hash;
}

bool MultiStructure::path_allowed(uint64_t hash) const {
    if (shape_) return true;
    if (std::binary_search(forbidden_.begin(), forbidden_.end(), hash)) return false;
    return std::none_of(named_.begin(), named_.end(),
                        [hash](const Named& named) { return named.is_path && named.key == hash; });
}

std::optional<MStep> MultiStructure::path_step(const MState& state, uint8_t byte) const {
    if (byte == '"') {
        if (state.pending || state.matched != kSegmentName || !path_allowed(state.hash)) {
            return std::nullopt;
        }
        return MStep{literal_in(state, MLiteral::CreateTail), false};
    }
    const int after = utf8_next(state.pending, byte);
    if (after == kUtf8Invalid) return std::nullopt;
    MState next = state;
    if (state.pending == 0) {
        if (forbidden_path_byte(byte) || state.chars >= kMaxPathChars) return std::nullopt;
        ++next.chars;
        if (byte == '/') {
            if (state.matched != kSegmentName) return std::nullopt;
            next.matched = kSegmentEmpty;
        } else if (byte == '.' && state.matched < kSegmentName) {
            next.matched = state.matched + 1;
        } else {
            next.matched = kSegmentName;
        }
    }
    next.pending = static_cast<uint8_t>(after);
    next.hash = path_hash_step(state.hash, byte);
    // At the length limit only the closing quote may follow: the path must be one to end on.
    if (!shape_ && next.chars == kMaxPathChars && after == 0 &&
        (next.matched != kSegmentName || !path_allowed(next.hash))) {
        return std::nullopt;
    }
    return MStep{next, false};
}

std::string MultiStructure::path_completion(const MState& state) const {
    // Finish the character, then close the path; a path that may not end here (empty, a "."
    // or ".." segment, a file's path) grows by a letter first.
    std::string out;
    MState current = state;
    const auto take = [&](uint8_t byte) {
        const std::optional<MStep> stepped = step(current, byte);
        if (!stepped) return false;
        current = stepped->state;
        out.push_back(static_cast<char>(byte));
        return true;
    };
    while (current.pending) {
        const Utf8Continuation& rule = kUtf8Continuation[current.pending];
        bool taken = false;
        for (int byte = rule.low; byte <= rule.high && !taken; ++byte) {
            taken = take(static_cast<uint8_t>(byte));
        }
        if (!taken) throw std::logic_error("path has no completion");
    }
    while (!take('"')) {
        if (!take('x') && !take('y') && !take('z')) throw std::logic_error("path has no completion");
    }
    return out;
}

}  // namespace cad::program
