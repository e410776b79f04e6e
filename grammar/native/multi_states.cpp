#include "multi_states.h"

#include <algorithm>
#include <stdexcept>

#include "multi_detail.h"
#include "utf8.h"

namespace cad::program {

const std::array<std::string, kMOpeners> kMOpenerText = {
    "<copy lines=\"", "<copy span=\"",    "<gen>",          "</program>", "<copy file=\"",
    "<edit file=\"",  "<create path=\"", "<delete file=\"", "</edit>",    "</create>"};

namespace {

const std::string kGenClose = "</gen>";
const std::array<std::string, kMLiterals> kMLiteralText = {"/>\n", "\n", ">\n", ">\n",
                                                           "/>\n", "\n", " lines=\"", " span=\""};

const std::string& literal_text(MLiteral literal) {
    return kMLiteralText[static_cast<int>(literal)];
}

MState await_in(Scope scope, uint32_t own) {
    MState state;
    state.scope = scope;
    state.own = own;
    return state;
}

MState await_prefix(const std::string& prefix) {
    MState state;
    for (int opener = 0; opener < kMOpeners; ++opener) {
        if (kMOpenerText[opener].compare(0, prefix.size(), prefix) == 0) {
            state.opener = static_cast<uint8_t>(opener);
            break;
        }
    }
    state.length = static_cast<uint8_t>(prefix.size());
    return state;
}

// A scope that writes ops: the program's start becomes a bare program with its first op.
MState op_state(const MState& from) {
    MState state;
    state.scope = from.scope == Scope::Top ? Scope::Bare : from.scope;
    state.own = from.scope == Scope::Top ? 1 : from.own;
    return state;
}

}  // namespace

int multi_slot(const MState& state) {
    switch (state.mode) {
        case MMode::Await:
            return state.opener * 16 + state.length;
        case MMode::Number:
            return 160 + static_cast<int>(state.field) * 8 + state.field_count * 2 +
                   (state.digit_count > 0 ? 1 : 0);
        case MMode::Literal:
            return 200 + static_cast<int>(state.literal) * 8 + state.length;
        case MMode::Path:
            return 264 + state.matched * 8 + state.pending;
        case MMode::End:
            return 296;
        case MMode::Gen:
            break;
    }
    return -1;
}

MultiStructure::MultiStructure(bool shape, bool subline) : shape_(shape), subline_(subline) {}

MultiStructure MultiStructure::shape() { return MultiStructure(true, true); }

MultiStructure::MultiStructure(std::vector<FileLines> files, std::vector<bool> editable,
                               std::vector<uint64_t> forbidden, bool subline)
    : shape_(false),
      subline_(subline),
      files_(std::move(files)),
      editable_(std::move(editable)),
      forbidden_(std::move(forbidden)),
      file_named_(files_.size() + 1, false) {
    editable_.resize(files_.size(), false);
    for (size_t k = 0; k < files_.size(); ++k) {
        if (!files_[k].widths.empty()) copyable_.push_back(k + 1);
    }
    std::sort(forbidden_.begin(), forbidden_.end());
    editable_left_ = static_cast<size_t>(std::count(editable_.begin(), editable_.end(), true));
}

void MultiStructure::name_file(uint64_t file) {
    named_.push_back({false, file});
    if (file < 1 || file >= file_named_.size()) return;
    if (editable_[file - 1] && !file_named_[file]) --editable_left_;
    file_named_[file] = true;
}

void MultiStructure::name_path(uint64_t hash) { named_.push_back({true, hash}); }

void MultiStructure::unname_to(size_t count) {
    while (named_.size() > count) {
        const Named& last = named_.back();
        if (!last.is_path && last.key >= 1 && last.key < file_named_.size()) {
            if (editable_[last.key - 1] && file_named_[last.key]) ++editable_left_;
            file_named_[last.key] = false;
        }
        named_.pop_back();
    }
}

uint64_t MultiStructure::lines_of(uint32_t file) const {
    return file >= 1 && file <= files_.size() ? files_[file - 1].widths.size() : 0;
}

bool MultiStructure::copyable_other(uint32_t own) const {
    const bool own_copyable = std::binary_search(copyable_.begin(), copyable_.end(), own);
    return copyable_.size() > (own_copyable ? 1u : 0u);
}

bool MultiStructure::any_editable() const { return editable_left_ > 0; }

bool MultiStructure::enabled(int opener, const MState& state) const {
    if (shape_) return true;
    const Scope scope = state.scope;
    const bool bare = !editable_.empty() && editable_[0];
    const bool sections = scope == Scope::Top || scope == Scope::Sections;
    const bool ops = scope == Scope::Bare || scope == Scope::Edit || scope == Scope::Create ||
                     (scope == Scope::Top && bare);
    const uint32_t own =
        scope == Scope::Top || scope == Scope::Bare ? 1 : (scope == Scope::Edit ? state.own : 0);
    switch (opener) {
        case MCopyLines:
            return ops && lines_of(own) > 0;
        case MCopySpan:
            return ops && subline_ && lines_of(own) > 0;
        case MGenOpen:
            return ops;
        case MProgramEnd:
            return scope == Scope::Bare || scope == Scope::Sections || (scope == Scope::Top && bare);
        case MCopyFile:
            return ops && copyable_other(own);
        case MEditOpen:
        case MDeleteOpen:
            return sections && any_editable();
        case MCreateOpen:
            return sections;
        case MEditClose:
            return scope == Scope::Edit;
        case MCreateClose:
            return scope == Scope::Create;
        default:
            return false;
    }
}

bool MultiStructure::context_dependent(const MState& state, uint8_t byte) {
    switch (state.mode) {
        case MMode::Await:
        case MMode::Number:
            return true;
        case MMode::Literal:
            return state.literal == MLiteral::AttrLines || state.literal == MLiteral::AttrSpan;
        case MMode::Path:
            return byte == '"';
        default:
            return false;
    }
}

std::optional<MStep> MultiStructure::step(const MState& state, uint8_t byte) const {
    switch (state.mode) {
        case MMode::Gen: {
            const int after = utf8_next(state.pending, byte);
            if (after == kUtf8Invalid) return std::nullopt;
            MState next = state;
            if (byte == static_cast<uint8_t>(kGenClose[state.matched])) {
                if (state.matched + 1u == kGenClose.size()) {
                    MState literal = literal_in(state, MLiteral::GenNewline);
                    literal.pending = literal.matched = 0;
                    return MStep{literal, false};
                }
                next.matched = state.matched + 1;
            } else {
                next.matched = byte == '<' ? 1 : 0;
            }
            next.pending = static_cast<uint8_t>(after);
            return MStep{next, false};
        }
        case MMode::Number:
            return number_step(state, byte);
        case MMode::Literal:
            return literal_step(state, byte);
        case MMode::Path:
            return path_step(state, byte);
        case MMode::Await:
            return await_step(state, byte);
        case MMode::End:
            break;
    }
    return std::nullopt;
}

std::optional<MStep> MultiStructure::await_step(const MState& state, uint8_t byte) const {
    const std::string& read = kMOpenerText[state.opener];
    const size_t length = state.length;
    bool prefix_of_enabled = false;
    int first_grown = -1;
    for (int opener = 0; opener < kMOpeners; ++opener) {
        const std::string& text = kMOpenerText[opener];
        if (text.size() <= length || text.compare(0, length, read, 0, length) != 0 ||
            static_cast<uint8_t>(text[length]) != byte) {
            continue;
        }
        if (first_grown < 0) first_grown = opener;
        if (!enabled(opener, state)) continue;
        if (text.size() > length + 1) {
            prefix_of_enabled = true;
            continue;
        }
        const MState ops = op_state(state);
        MState sections;
        sections.scope = Scope::Sections;
        switch (opener) {
            case MCopyLines:
                return MStep{number_in(ops, Field::Lines, 0), false};
            case MCopySpan:
                return MStep{number_in(ops, Field::Span, 0), false};
            case MCopyFile:
                return MStep{number_in(ops, Field::CopyFile, 0), false};
            case MGenOpen: {
                MState gen = ops;
                gen.mode = MMode::Gen;
                return MStep{gen, false};
            }
            case MProgramEnd: {
                MState end;
                end.mode = MMode::End;
                return MStep{end, false};
            }
            case MEditOpen:
                return MStep{number_in(sections, Field::EditFile, 0), false};
            case MDeleteOpen:
                return MStep{number_in(sections, Field::DeleteFile, 0), false};
            case MCreateOpen: {
                MState path = sections;
                path.mode = MMode::Path;
                return MStep{path, false};
            }
            default:
                return MStep{literal_in(state, MLiteral::CloseNewline), false};
        }
    }
    if (!prefix_of_enabled) return std::nullopt;
    MState next = state;
    next.opener = static_cast<uint8_t>(first_grown);
    next.length = static_cast<uint8_t>(length + 1);
    return MStep{next, false};
}

std::optional<MStep> MultiStructure::literal_step(const MState& state, uint8_t byte) const {
    const std::string& text = literal_text(state.literal);
    if (state.literal == MLiteral::AttrLines && state.length == 1 && byte == 's') {
        if (!subline_) return std::nullopt;
        MState next = state;
        next.literal = MLiteral::AttrSpan;
        next.length = 2;
        return MStep{next, false};
    }
    if (byte != static_cast<uint8_t>(text[state.length])) return std::nullopt;
    if (state.length + 1u < text.size()) {
        MState next = state;
        ++next.length;
        return MStep{next, false};
    }
    switch (state.literal) {
        case MLiteral::AttrLines:
        case MLiteral::AttrSpan: {
            const Field field = state.literal == MLiteral::AttrLines ? Field::Lines : Field::Span;
            return MStep{number_in(state, field, state.file), false};
        }
        case MLiteral::EditTail:
            return MStep{await_in(Scope::Edit, static_cast<uint32_t>(state.values[0])), true};
        case MLiteral::CreateTail:
            return MStep{await_in(Scope::Create, 0), true};
        case MLiteral::DeleteTail:
        case MLiteral::CloseNewline:
            return MStep{await_in(Scope::Sections, 0), true};
        default:
            return MStep{await_in(state.scope, state.own), true};
    }
}

std::optional<MState> MultiStructure::walk(MState state, const char* data, size_t size,
                                           bool cross_ops) const {
    for (size_t position = 0; position < size; ++position) {
        const std::optional<MStep> stepped = step(state, static_cast<uint8_t>(data[position]));
        if (!stepped) return std::nullopt;
        state = stepped->state;
        if (stepped->op_ended && !cross_ops && position + 1 < size) return std::nullopt;
    }
    return state;
}

std::string MultiStructure::forced(MState state) const {
    static const std::string kNumberBytes = "0123456789-:\"";
    std::string forced;
    std::string candidates;
    while (state.mode == MMode::Await || state.mode == MMode::Number ||
           state.mode == MMode::Literal) {
        candidates.clear();
        if (state.mode == MMode::Number) {
            candidates = kNumberBytes;
        } else if (state.mode == MMode::Literal) {
            candidates.push_back(literal_text(state.literal)[state.length]);
            if (state.literal == MLiteral::AttrLines && state.length == 1) candidates.push_back('s');
        } else {
            for (const std::string& text : kMOpenerText) {
                if (text.size() > state.length) candidates.push_back(text[state.length]);
            }
        }
        const std::optional<uint8_t> only = only_accepted_byte(
            candidates, [&](uint8_t byte) { return step(state, byte).has_value(); });
        if (!only) break;
        forced.push_back(static_cast<char>(*only));
        const MStep stepped = *step(state, *only);
        state = stepped.state;
        if (stepped.op_ended) break;
    }
    return forced;
}

std::string MultiStructure::completion(MState state) const {
    std::string completion;
    while (state.mode != MMode::End) {
        const std::string chunk = completion_chunk(state);
        const std::optional<MState> next = walk(state, chunk.data(), chunk.size(), true);
        if (!next || chunk.empty()) throw std::logic_error("program completion failed");
        state = *next;
        completion += chunk;
    }
    return completion;
}

std::string MultiStructure::completion_chunk(const MState& state) const {
    switch (state.mode) {
        case MMode::Gen: {
            if (!state.pending) return kGenClose.substr(state.matched);
            std::string rest;
            for (uint8_t pending = state.pending; pending;) {
                rest.push_back(static_cast<char>(kUtf8Continuation[pending].low));
                pending = kUtf8Continuation[pending].then;
            }
            return rest;
        }
        case MMode::Number:
            return number_completion(state);
        case MMode::Literal:
            return literal_text(state.literal).substr(state.length);
        case MMode::Path:
            return path_completion(state);
        case MMode::Await: {
            const std::string prefix = kMOpenerText[state.opener].substr(0, state.length);
            for (int opener : {MProgramEnd, MEditClose, MCreateClose, MCopyLines, MGenOpen,
                               MCopySpan, MCopyFile, MDeleteOpen, MEditOpen, MCreateOpen}) {
                const std::string& text = kMOpenerText[opener];
                if (enabled(opener, state) && text.compare(0, prefix.size(), prefix) == 0) {
                    return text.substr(prefix.size());
                }
            }
            break;
        }
        case MMode::End:
            break;
    }
    throw std::logic_error("no completion from this program state");
}

std::optional<MState> MultiStructure::representative(int slot) const {
    if (slot < 160) {
        const int opener = slot / 16;
        const int length = slot % 16;
        for (const std::string& text : kMOpenerText) {
            if (static_cast<size_t>(length) >= text.size()) continue;
            const MState state = await_prefix(text.substr(0, length));
            if (state.opener == opener) return state;
        }
        return std::nullopt;
    }
    if (slot < 200) {
        const auto field = static_cast<Field>((slot - 160) / 8);
        const int field_count = (slot - 160) % 8 / 2;
        const bool has_digits = (slot - 160) % 2;
        if (field > Field::DeleteFile) return std::nullopt;
        const int fields = field == Field::Lines ? 2 : (field == Field::Span ? 4 : 1);
        if (field_count >= fields) return std::nullopt;
        MState state;
        state.mode = MMode::Number;
        state.field = field;
        state.field_count = static_cast<uint8_t>(field_count);
        state.values = {1, 1, 1, 1};
        state.own = 1;
        state.digit_count = has_digits ? 1 : 0;
        state.digits = has_digits ? 1 : 0;
        return state;
    }
    if (slot < 264) {
        const auto literal = static_cast<MLiteral>((slot - 200) / 8);
        const int length = (slot - 200) % 8;
        if ((slot - 200) / 8 >= kMLiterals) return std::nullopt;
        if (static_cast<size_t>(length) >= literal_text(literal).size()) return std::nullopt;
        if (literal == MLiteral::AttrSpan && length < 2) return std::nullopt;
        MState state;
        state.mode = MMode::Literal;
        state.literal = literal;
        state.length = static_cast<uint8_t>(length);
        state.values = {1, 1, 1, 1};
        state.own = state.file = 1;
        return state;
    }
    if (slot < 296) {
        const int segment = (slot - 264) / 8;
        const int pending = (slot - 264) % 8;
        if (segment > kSegmentName || (pending && segment != kSegmentName)) return std::nullopt;
        MState state;
        state.mode = MMode::Path;
        state.matched = static_cast<uint8_t>(segment);
        state.pending = static_cast<uint8_t>(pending);
        state.chars = 1;
        return state;
    }
    if (slot == 296) {
        MState state;
        state.mode = MMode::End;
        return state;
    }
    return std::nullopt;
}

}  // namespace cad::program
