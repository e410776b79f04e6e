/**
 * Applying LSP text edits to a string, as an editor does.
 *
 * Positions are LSP positions: lines end at LF, CRLF or CR, and characters count UTF-16 code
 * units (which is what JavaScript string indices count). Used for the preview (a dry run's
 * edits applied to the document text) and by the tests.
 */

/** A zero-based LSP position. */
export interface Position {
  line: number;
  character: number;
}

/** An LSP range; `end` is exclusive. */
export interface Range {
  start: Position;
  end: Position;
}

/** An LSP `TextEdit`. */
export interface TextEdit {
  range: Range;
  newText: string;
}

/** Offsets at which each line of `text` starts; a terminator at the very end opens one more line. */
export function lineStarts(text: string): number[] {
  const starts = [0];
  for (let i = 0; i < text.length; i++) {
    const char = text.charCodeAt(i);
    if (char === 0x0d) {
      if (text.charCodeAt(i + 1) === 0x0a) {
        i++;
      }
      starts.push(i + 1);
    } else if (char === 0x0a) {
      starts.push(i + 1);
    }
  }
  return starts;
}

/**
 * The string offset of an LSP position. A character past the end of its line is clamped to
 * the line's end (before its terminator) and a line past the last one means the end of the
 * text, as the protocol asks.
 */
export function offsetAt(text: string, position: Position, starts: number[] = lineStarts(text)): number {
  if (position.line < 0) {
    return 0;
  }
  if (position.line >= starts.length) {
    return text.length;
  }
  const start = starts[position.line];
  let end = position.line + 1 < starts.length ? starts[position.line + 1] : text.length;
  if (end > start && text.charCodeAt(end - 1) === 0x0a) {
    end--;
  }
  if (end > start && text.charCodeAt(end - 1) === 0x0d) {
    end--;
  }
  return Math.min(start + Math.max(position.character, 0), end);
}

/** The LSP position of a string offset (the inverse of {@link offsetAt} on valid positions). */
export function positionAt(text: string, offset: number, starts: number[] = lineStarts(text)): Position {
  const clamped = Math.max(0, Math.min(offset, text.length));
  let low = 0;
  let high = starts.length - 1;
  while (low < high) {
    const middle = (low + high + 1) >> 1;
    if (starts[middle] <= clamped) {
      low = middle;
    } else {
      high = middle - 1;
    }
  }
  return { line: low, character: clamped - starts[low] };
}

/**
 * Apply non-overlapping edits to `text` and return the new text. Edits may come in any order;
 * inserts at the same position keep their array order. Overlapping edits are an error.
 */
export function applyTextEdits(text: string, edits: readonly TextEdit[]): string {
  const starts = lineStarts(text);
  const spans = edits
    .map((edit, index) => ({
      start: offsetAt(text, edit.range.start, starts),
      end: offsetAt(text, edit.range.end, starts),
      newText: edit.newText,
      index,
    }))
    .sort((a, b) => a.start - b.start || a.end - b.end || a.index - b.index);
  const pieces: string[] = [];
  let cursor = 0;
  for (const span of spans) {
    if (span.end < span.start) {
      throw new Error(`edit ${span.index} ends before it starts`);
    }
    if (span.start < cursor) {
      throw new Error(`edit ${span.index} overlaps an earlier edit`);
    }
    pieces.push(text.slice(cursor, span.start), span.newText);
    cursor = span.end;
  }
  pieces.push(text.slice(cursor));
  return pieces.join("");
}
