/**
 * Program text handed to `cad.applyEdit` (see the project's docs/program.md):
 * `<copy lines="i-j"/>`, `<copy span="L:C-L:C"/>`, `<gen>text</gen>`, ended by `</program>`;
 * a multi-file program in sections (`<edit file="k">`, `<create path="p">`, `<delete file="k"/>`)
 * whose copies may name their file (`<copy file="k" lines="i-j"/>`).
 */

const END = "</program>";

/** Whether `text` starts like a program (its first op or section, or the end marker). */
export function looksLikeProgram(text: string): boolean {
  return /^\s*(<copy\s+(file|lines|span)="|<gen>|<\/program>|<(edit|delete)\s+file="|<create\s+path=")/.test(text);
}

/**
 * `text` with `</program>` at its end (added on a new line when missing), so a program typed
 * without it still parses. Whitespace around the marker is allowed by the grammar.
 */
export function completeProgram(text: string): string {
  return text.trimEnd().endsWith(END) ? text : `${text.trimEnd()}\n${END}`;
}

/** A `<gen>` body with every `<` + k backslashes + `/gen>` escaped by one more backslash. */
export function escapeGen(text: string): string {
  return text.replace(/<(\\*)\/gen>/g, (_match, slashes: string) => `<\\${slashes}/gen>`);
}

