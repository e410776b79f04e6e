/**
 * A small stand-in for the `vscode` module: enough of the API for the extension's modules and
 * for the real `vscode-languageclient` to run under Node. Tests import it as `vscode` (vitest
 * aliases the name, and test/setup.ts hands it to `require("vscode")`), and drive it through
 * {@link fake}: open documents, settings, answers to prompts, and records of what was shown.
 */

import { applyTextEdits, offsetAt, positionAt } from "../../src/lib/textEdits";

// ---------------------------------------------------------------------------------------------
// Basic types

/** Something to dispose. */
export class Disposable {
  /** One disposable for many. */
  static from(...items: { dispose(): unknown }[]): Disposable {
    return new Disposable(() => items.forEach((item) => item.dispose()));
  }

  constructor(private readonly callback: () => unknown) {}

  dispose(): void {
    this.callback();
  }
}

/** A listener registration function, as `vscode.Event` is. */
export type Event<T> = (listener: (value: T) => unknown, thisArg?: unknown, disposables?: Disposable[]) => Disposable;

/** An event source. */
export class EventEmitter<T> {
  private readonly listeners = new Set<(value: T) => unknown>();

  readonly event: Event<T> = (listener, thisArg, disposables) => {
    const bound = (value: T): unknown => listener.call(thisArg, value);
    this.listeners.add(bound);
    const disposable = new Disposable(() => this.listeners.delete(bound));
    disposables?.push(disposable);
    return disposable;
  };

  fire(value: T): void {
    for (const listener of [...this.listeners]) {
      listener(value);
    }
  }

  dispose(): void {
    this.listeners.clear();
  }
}

/** A cancellation signal. */
export interface CancellationToken {
  readonly isCancellationRequested: boolean;
  readonly onCancellationRequested: Event<void>;
}

/** Creates and cancels a {@link CancellationToken}. */
export class CancellationTokenSource {
  private cancelled = false;
  private readonly emitter = new EventEmitter<void>();
  readonly token: CancellationToken;

  constructor() {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the token reads the source's state
    const source = this;
    this.token = {
      get isCancellationRequested() {
        return source.cancelled;
      },
      onCancellationRequested: (listener, thisArg, disposables) => {
        if (source.cancelled) {
          listener.call(thisArg);
          return new Disposable(() => undefined);
        }
        return source.emitter.event(listener, thisArg, disposables);
      },
    };
  }

  cancel(): void {
    if (!this.cancelled) {
      this.cancelled = true;
      this.emitter.fire();
    }
  }

  dispose(): void {
    this.emitter.dispose();
  }
}

/** Thrown by cancelled operations. */
export class CancellationError extends Error {}

/** A zero-based line and UTF-16 character. */
export class Position {
  constructor(
    readonly line: number,
    readonly character: number,
  ) {}

  isEqual(other: Position): boolean {
    return this.line === other.line && this.character === other.character;
  }
}

/** A range of positions. */
export class Range {
  readonly start: Position;
  readonly end: Position;

  constructor(start: Position | number, end: Position | number, endLine?: number, endCharacter?: number) {
    if (typeof start === "number" && typeof end === "number") {
      this.start = new Position(start, end);
      this.end = new Position(endLine ?? start, endCharacter ?? end);
    } else {
      this.start = start as Position;
      this.end = end as Position;
    }
  }

  get isEmpty(): boolean {
    return this.start.isEqual(this.end);
  }
}

/** A selection: a range with an anchor and an active end. */
export class Selection extends Range {
  constructor(
    readonly anchor: Position,
    readonly active: Position,
  ) {
    const forwards = anchor.line < active.line || (anchor.line === active.line && anchor.character <= active.character);
    super(forwards ? anchor : active, forwards ? active : anchor);
  }
}

/** A URI: `scheme://authority/path?query#fragment`. */
export class Uri {
  private constructor(
    readonly scheme: string,
    readonly authority: string,
    readonly path: string,
    readonly query: string,
    readonly fragment: string,
  ) {}

  /** Parse a URI string. */
  static parse(value: string): Uri {
    const match = /^([a-zA-Z][\w+.-]*):(?:\/\/([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$/.exec(value);
    if (match === null) {
      throw new Error(`not a URI: ${value}`);
    }
    const decode = (part: string | undefined): string => decodeURIComponent(part ?? "");
    return new Uri(match[1], decode(match[2]), decode(match[3]), decode(match[4]), decode(match[5]));
  }

  /** The URI of a file path. */
  static file(fsPath: string): Uri {
    return new Uri("file", "", fsPath.startsWith("/") ? fsPath : `/${fsPath}`, "", "");
  }

  /** A URI from its parts. */
  static from(parts: { scheme: string; authority?: string; path?: string; query?: string; fragment?: string }): Uri {
    return new Uri(parts.scheme, parts.authority ?? "", parts.path ?? "", parts.query ?? "", parts.fragment ?? "");
  }

  get fsPath(): string {
    return this.path;
  }

  with(change: { scheme?: string; authority?: string; path?: string; query?: string; fragment?: string }): Uri {
    return new Uri(
      change.scheme ?? this.scheme,
      change.authority ?? this.authority,
      change.path ?? this.path,
      change.query ?? this.query,
      change.fragment ?? this.fragment,
    );
  }

  toString(): string {
    const encode = (part: string): string => encodeURI(part).replace(/[?#]/g, encodeURIComponent);
    let text = `${this.scheme}:`;
    if (this.authority !== "" || this.scheme === "file") {
      text += `//${encode(this.authority)}`;
    }
    text += encode(this.path);
    if (this.query !== "") {
      text += `?${encodeURIComponent(this.query)}`;
    }
    if (this.fragment !== "") {
      text += `#${encodeURIComponent(this.fragment)}`;
    }
    return text;
  }

  toJSON(): string {
    return this.toString();
  }
}

/** A replacement of a range with text. */
export class TextEdit {
  static replace(range: Range, newText: string): TextEdit {
    return new TextEdit(range, newText);
  }

  static insert(position: Position, newText: string): TextEdit {
    return new TextEdit(new Range(position, position), newText);
  }

  static delete(range: Range): TextEdit {
    return new TextEdit(range, "");
  }

  constructor(
    readonly range: Range,
    readonly newText: string,
  ) {}
}

/** Metadata of a workspace edit's entry (`needsConfirmation` opens the refactor preview). */
export interface WorkspaceEditEntryMetadata {
  needsConfirmation: boolean;
  label: string;
  description?: string;
}

/** A file operation or text edit of a workspace edit, in the order it was added. */
export type WorkspaceEditOperation =
  | { kind: "create"; uri: Uri; options?: { overwrite?: boolean; ignoreIfExists?: boolean; contents?: Uint8Array }; metadata?: WorkspaceEditEntryMetadata }
  | { kind: "delete"; uri: Uri; options?: { recursive?: boolean; ignoreIfNotExists?: boolean }; metadata?: WorkspaceEditEntryMetadata }
  | { kind: "edit"; uri: Uri; edit: TextEdit; metadata?: WorkspaceEditEntryMetadata };

/** Text edits of several documents, and file creations and deletions. */
export class WorkspaceEdit {
  private readonly edits = new Map<string, { uri: Uri; edits: TextEdit[] }>();
  /** Every entry in order, file operations included. */
  readonly operations: WorkspaceEditOperation[] = [];

  replace(uri: Uri, range: Range, newText: string, metadata?: WorkspaceEditEntryMetadata): void {
    this.add(uri, new TextEdit(range, newText), metadata);
  }

  createFile(
    uri: Uri,
    options?: { overwrite?: boolean; ignoreIfExists?: boolean; contents?: Uint8Array },
    metadata?: WorkspaceEditEntryMetadata,
  ): void {
    this.operations.push({ kind: "create", uri, options, metadata });
  }

  deleteFile(uri: Uri, options?: { recursive?: boolean; ignoreIfNotExists?: boolean }, metadata?: WorkspaceEditEntryMetadata): void {
    this.operations.push({ kind: "delete", uri, options, metadata });
  }

  insert(uri: Uri, position: Position, newText: string): void {
    this.add(uri, TextEdit.insert(position, newText));
  }

  delete(uri: Uri, range: Range): void {
    this.add(uri, TextEdit.delete(range));
  }

  set(uri: Uri, edits: TextEdit[]): void {
    this.edits.set(uri.toString(), { uri, edits: [...edits] });
  }

  get(uri: Uri): TextEdit[] {
    return this.edits.get(uri.toString())?.edits ?? [];
  }

  entries(): [Uri, TextEdit[]][] {
    return [...this.edits.values()].map(({ uri, edits }) => [uri, edits]);
  }

  get size(): number {
    return this.edits.size;
  }

  private add(uri: Uri, edit: TextEdit, metadata?: WorkspaceEditEntryMetadata): void {
    const entry = this.edits.get(uri.toString()) ?? { uri, edits: [] };
    entry.edits.push(edit);
    this.edits.set(uri.toString(), entry);
    this.operations.push({ kind: "edit", uri, edit, metadata });
  }
}

/** A theme color reference. */
export class ThemeColor {
  constructor(readonly id: string) {}
}

/** Where a status bar item sits. */
export enum StatusBarAlignment {
  Left = 1,
  Right = 2,
}

/** Where progress shows. */
export enum ProgressLocation {
  SourceControl = 1,
  Window = 10,
  Notification = 15,
}

/** Why a document is saved. */
export enum TextDocumentSaveReason {
  Manual = 1,
  AfterDelay = 2,
  FocusOut = 3,
}

/** A diff editor tab's input. */
export class TabInputTextDiff {
  constructor(
    readonly original: Uri,
    readonly modified: Uri,
  ) {}
}

/** A text editor tab's input. */
export class TabInputText {
  constructor(readonly uri: Uri) {}
}

/** A custom editor tab's input. */
export class TabInputCustom {
  constructor(
    readonly uri: Uri,
    readonly viewType: string,
  ) {}
}

/** A code action kind such as `refactor.rewrite`. */
export class CodeActionKind {
  static readonly Empty = new CodeActionKind("");
  static readonly QuickFix = new CodeActionKind("quickfix");
  static readonly Refactor = new CodeActionKind("refactor");
  static readonly RefactorExtract = new CodeActionKind("refactor.extract");
  static readonly RefactorInline = new CodeActionKind("refactor.inline");
  static readonly RefactorRewrite = new CodeActionKind("refactor.rewrite");
  static readonly Source = new CodeActionKind("source");
  static readonly SourceOrganizeImports = new CodeActionKind("source.organizeImports");

  private constructor(readonly value: string) {}

  append(part: string): CodeActionKind {
    return new CodeActionKind(this.value ? `${this.value}.${part}` : part);
  }
}

/** How a code action request was triggered. */
export enum CodeActionTriggerKind {
  Invoke = 1,
  Automatic = 2,
}

/** A command reference. */
export interface Command {
  title: string;
  command: string;
  arguments?: unknown[];
}

/** A code action. */
export class CodeAction {
  command?: Command;
  edit?: WorkspaceEdit;

  constructor(
    readonly title: string,
    public kind?: CodeActionKind,
  ) {}
}

/** Diagnostic severities. */
export enum DiagnosticSeverity {
  Error = 0,
  Warning = 1,
  Information = 2,
  Hint = 3,
}

/** A diagnostic. */
export class Diagnostic {
  constructor(
    readonly range: Range,
    readonly message: string,
    readonly severity: DiagnosticSeverity = DiagnosticSeverity.Error,
  ) {}
}

/** Language features the client subclasses when it loads; the extension uses none of them. */
export class CodeLens {}
export class CompletionItem {}
export class DocumentLink {}
export class InlayHint {}
export class SymbolInformation {}
export class TypeHierarchyItem {}
export class CallHierarchyItem {}

// ---------------------------------------------------------------------------------------------
// Documents and editors

/** An open document whose text tests set and the workspace edits. */
export class FakeTextDocument {
  version: number;
  isClosed = false;
  readonly isDirty = false;
  readonly isUntitled = false;
  readonly eol = 1;

  constructor(
    readonly uri: Uri,
    private text: string,
    readonly languageId = "python",
    version = 1,
  ) {
    this.version = version;
  }

  get fileName(): string {
    return this.uri.fsPath;
  }

  get lineCount(): number {
    return this.text.split(/\r\n|\r|\n/).length;
  }

  getText(range?: Range): string {
    if (range === undefined) {
      return this.text;
    }
    return this.text.slice(offsetAt(this.text, range.start), offsetAt(this.text, range.end));
  }

  offsetAt(position: Position): number {
    return offsetAt(this.text, position);
  }

  positionAt(offset: number): Position {
    const { line, character } = positionAt(this.text, offset);
    return new Position(line, character);
  }

  /** Replace the text, bump the version and tell listeners, as an edit in the editor does. */
  setText(text: string): void {
    const whole = new Range(new Position(0, 0), this.positionAt(this.text.length));
    const rangeLength = this.text.length;
    this.text = text;
    this.version += 1;
    workspaceEvents.change.fire({
      document: this,
      contentChanges: [{ range: whole, rangeOffset: 0, rangeLength, text }],
      reason: undefined,
    });
  }
}

/** An editor showing a document with a selection. */
export interface FakeTextEditor {
  document: FakeTextDocument;
  selection: Selection;
}

// ---------------------------------------------------------------------------------------------
// The fake's state, which tests read and set

/** A message box shown by the extension. */
export interface ShownMessage {
  severity: "error" | "warning" | "information";
  message: string;
  items: string[];
}

/** A progress notification shown by the extension. */
export interface ShownProgress {
  options: { location: ProgressLocation; title?: string; cancellable?: boolean };
  reports: { message?: string }[];
  /** Press the notification's Cancel button. */
  cancel(): void;
}

/** The quick pick the extension shows; tests type into it and accept or dismiss it. */
export class FakeQuickPick<T extends { label: string }> {
  title: string | undefined;
  placeholder: string | undefined;
  ignoreFocusOut = false;
  matchOnDescription = false;
  items: readonly T[] = [];
  selectedItems: readonly T[] = [];
  private current = "";
  private readonly accepted = new EventEmitter<void>();
  private readonly hidden = new EventEmitter<void>();
  private readonly changed = new EventEmitter<string>();
  readonly onDidAccept = this.accepted.event;
  readonly onDidHide = this.hidden.event;
  readonly onDidChangeValue = this.changed.event;

  get value(): string {
    return this.current;
  }

  set value(value: string) {
    this.current = value;
    this.changed.fire(value);
  }

  show(): void {
    fake.quickPicks.push(this);
    fake.onQuickPick(this);
  }

  /** Type `value` and press Enter. */
  type(value: string): void {
    this.value = value;
    this.selectedItems = this.items.filter((item) => item.label === value.trim()).slice(0, 1);
    this.accepted.fire();
  }

  /** Pick the item labelled `label` and press Enter. */
  pick(label: string): void {
    this.selectedItems = this.items.filter((item) => item.label === label);
    this.accepted.fire();
  }

  hide(): void {
    this.hidden.fire();
  }

  dispose(): void {
    this.accepted.dispose();
    this.hidden.dispose();
    this.changed.dispose();
  }
}

/** An output channel that keeps its lines. */
export class FakeOutputChannel {
  readonly lines: string[] = [];
  shown = false;

  constructor(readonly name: string) {}

  append(text: string): void {
    this.lines.push(text);
  }

  appendLine(line: string): void {
    this.lines.push(line);
  }

  replace(text: string): void {
    this.lines.splice(0, this.lines.length, text);
  }

  clear(): void {
    this.lines.splice(0);
  }

  show(): void {
    this.shown = true;
  }

  hide(): void {
    this.shown = false;
  }

  dispose(): void {}
}

/** A status bar item that keeps what it shows. */
export class FakeStatusBarItem {
  text = "";
  tooltip: string | undefined;
  command: string | undefined;
  name: string | undefined;
  backgroundColor: ThemeColor | undefined;
  visible = false;
  disposed = false;

  constructor(
    readonly id: string,
    readonly alignment: StatusBarAlignment,
    readonly priority: number,
  ) {}

  show(): void {
    this.visible = true;
  }

  hide(): void {
    this.visible = false;
  }

  dispose(): void {
    this.disposed = true;
  }
}

/** A document change event, as the language client reads it. */
interface ChangeEvent {
  document: FakeTextDocument;
  contentChanges: { range: Range; rangeOffset: number; rangeLength: number; text: string }[];
  reason: undefined;
}

const workspaceEvents = {
  open: new EventEmitter<FakeTextDocument>(),
  close: new EventEmitter<FakeTextDocument>(),
  change: new EventEmitter<ChangeEvent>(),
  configuration: new EventEmitter<{ affectsConfiguration(section: string): boolean }>(),
  trust: new EventEmitter<void>(),
};

/** Everything tests control and observe. */
export const fake = {
  documents: [] as FakeTextDocument[],
  activeEditor: undefined as FakeTextEditor | undefined,
  /** The user's settings by full key, e.g. `cad.preview`. */
  settings: new Map<string, unknown>(),
  /** The open workspace's settings (`.vscode/settings.json`), which win over the user's. */
  workspaceSettings: new Map<string, unknown>(),
  /** Whether the user trusts the open workspace. */
  trusted: true,
  messages: [] as ShownMessage[],
  statusMessages: [] as string[],
  progress: [] as ShownProgress[],
  quickPicks: [] as FakeQuickPick<{ label: string }>[],
  outputChannels: [] as FakeOutputChannel[],
  statusBarItems: [] as FakeStatusBarItem[],
  /** Commands run through `executeCommand` that nobody registered (e.g. `vscode.diff`). */
  executed: [] as { command: string; args: unknown[] }[],
  /** Every `workspace.applyEdit` call. */
  appliedEdits: [] as WorkspaceEdit[],
  /** Files on disk that are not open, by URI (`workspace.fs.stat` finds them). */
  files: new Set<string>(),
  /** The workspace folder `getWorkspaceFolder` finds documents under. */
  workspaceFolder: undefined as Uri | undefined,
  /** Answers `showQuickPick` with `canPickMany`; by default it is dismissed. */
  pickMany: (_items: readonly { label: string; picked?: boolean }[]): { label: string }[] | undefined => undefined,
  globalState: new Map<string, unknown>(),
  clipboard: "",
  /** Called when a quick pick opens; by default it is dismissed. */
  onQuickPick: (picker: FakeQuickPick<{ label: string }>): void => picker.hide(),
  /** Answers message boxes (the button to press); by default none is pressed. */
  answer: (_message: ShownMessage): string | undefined => undefined,
  /** Answers `showQuickPick`; by default it is dismissed. */
  pickFrom: (_items: readonly { label: string }[]): { label: string } | undefined => undefined,
  /** Answers `showInputBox`; by default it is dismissed. */
  inputBox: (_options: unknown): string | undefined => undefined,
  /** Told about every `executeCommand` of a command nobody registered. */
  onExecute: (_command: string, _args: unknown[]): unknown => undefined,

  /** Open `text` as a document (and tell listeners, as VS Code does). */
  open(uri: string, text: string, languageId = "python", version = 1): FakeTextDocument {
    const document = new FakeTextDocument(Uri.parse(uri), text, languageId, version);
    this.documents.push(document);
    workspaceEvents.open.fire(document);
    return document;
  },

  /** Show `document` in the active editor with a selection from `anchor` to `active`. */
  showEditor(document: FakeTextDocument, anchor: Position, active: Position = anchor): FakeTextEditor {
    this.activeEditor = { document, selection: new Selection(anchor, active) };
    return this.activeEditor;
  },

  /** Change settings and fire the configuration event. */
  configure(values: Record<string, unknown>): void {
    for (const [key, value] of Object.entries(values)) {
      this.settings.set(key, value);
    }
    const keys = Object.keys(values);
    workspaceEvents.configuration.fire({
      affectsConfiguration: (section) => keys.some((key) => key === section || key.startsWith(`${section}.`)),
    });
  },

  /** Trust the workspace, as the user does in the trust dialog. */
  grantTrust(): void {
    this.trusted = true;
    workspaceEvents.trust.fire();
  },

  /** A command registered through `commands.registerCommand`. */
  command(id: string): (...args: unknown[]) => unknown {
    const handler = registeredCommands.get(id);
    if (handler === undefined) {
      throw new Error(`command ${id} is not registered`);
    }
    return handler;
  },

  /** Resolves with the next error message box shown (it answers every message with nothing). */
  nextError(): Promise<ShownMessage> {
    return new Promise((resolve) => {
      this.answer = (shown) => {
        if (shown.severity === "error") {
          resolve(shown);
        }
        return undefined;
      };
    });
  },

  /** Forget documents, settings, answers and records (between tests); registrations stay until disposed. */
  reset(): void {
    for (const document of this.documents) {
      document.isClosed = true;
    }
    this.documents = [];
    this.activeEditor = undefined;
    this.settings.clear();
    this.workspaceSettings.clear();
    this.trusted = true;
    this.messages = [];
    this.statusMessages = [];
    this.progress = [];
    this.quickPicks = [];
    this.outputChannels = [];
    this.statusBarItems = [];
    this.executed = [];
    this.appliedEdits = [];
    this.files.clear();
    this.workspaceFolder = undefined;
    this.pickMany = () => undefined;
    this.globalState.clear();
    this.clipboard = "";
    this.onQuickPick = (picker) => picker.hide();
    this.answer = () => undefined;
    this.pickFrom = () => undefined;
    this.inputBox = () => undefined;
    this.onExecute = () => undefined;
  },
};

// ---------------------------------------------------------------------------------------------
// Namespaces

const registeredCommands = new Map<string, (...args: unknown[]) => unknown>();

function showMessage(severity: ShownMessage["severity"]) {
  return (message: string, ...rest: unknown[]): Promise<string | undefined> => {
    const items = rest.filter((item): item is string => typeof item === "string");
    const shown = { severity, message, items };
    fake.messages.push(shown);
    return Promise.resolve(fake.answer(shown));
  };
}

/** The `vscode.window` namespace. */
export const window = {
  get activeTextEditor(): FakeTextEditor | undefined {
    return fake.activeEditor;
  },
  onDidChangeActiveTextEditor: new EventEmitter<FakeTextEditor | undefined>().event,
  tabGroups: {
    all: [] as { tabs: { input: unknown }[] }[],
    close: (): Promise<boolean> => Promise.resolve(true),
  },
  showErrorMessage: showMessage("error"),
  showWarningMessage: showMessage("warning"),
  showInformationMessage: showMessage("information"),
  setStatusBarMessage(message: string): Disposable {
    fake.statusMessages.push(message);
    return new Disposable(() => undefined);
  },
  createOutputChannel(name: string): FakeOutputChannel {
    const channel = new FakeOutputChannel(name);
    fake.outputChannels.push(channel);
    return channel;
  },
  createStatusBarItem(id: string, alignment: StatusBarAlignment, priority: number): FakeStatusBarItem {
    const item = new FakeStatusBarItem(id, alignment, priority);
    fake.statusBarItems.push(item);
    return item;
  },
  createQuickPick<T extends { label: string }>(): FakeQuickPick<T> {
    return new FakeQuickPick<T>();
  },
  showQuickPick<T extends { label: string }>(items: readonly T[], options?: { canPickMany?: boolean }): Promise<T | T[] | undefined> {
    if (options?.canPickMany) {
      return Promise.resolve(fake.pickMany(items) as T[] | undefined);
    }
    return Promise.resolve(fake.pickFrom(items) as T | undefined);
  },
  showInputBox(options: unknown): Promise<string | undefined> {
    return Promise.resolve(fake.inputBox(options));
  },
  showOpenDialog(): Promise<Uri[] | undefined> {
    return Promise.resolve(undefined);
  },
  async withProgress<R>(
    options: ShownProgress["options"],
    task: (progress: { report(value: { message?: string }): void }, token: CancellationToken) => Promise<R>,
  ): Promise<R> {
    const source = new CancellationTokenSource();
    const shown: ShownProgress = { options, reports: [], cancel: () => source.cancel() };
    fake.progress.push(shown);
    try {
      return await task({ report: (value) => shown.reports.push(value) }, source.token);
    } finally {
      source.dispose();
    }
  },
};

/** The `vscode.workspace` namespace. */
export const workspace = {
  get textDocuments(): FakeTextDocument[] {
    return fake.documents;
  },
  workspaceFolders: undefined,
  onDidOpenTextDocument: workspaceEvents.open.event,
  onDidCloseTextDocument: workspaceEvents.close.event,
  onDidChangeTextDocument: workspaceEvents.change.event,
  onDidSaveTextDocument: new EventEmitter<FakeTextDocument>().event,
  onWillSaveTextDocument: new EventEmitter<unknown>().event,
  onDidChangeWorkspaceFolders: new EventEmitter<unknown>().event,
  onDidChangeConfiguration: workspaceEvents.configuration.event,
  onDidGrantWorkspaceTrust: workspaceEvents.trust.event,
  get isTrusted(): boolean {
    return fake.trusted;
  },
  getConfiguration(section?: string) {
    const key = (name: string): string => (section ? `${section}.${name}` : name);
    const value = (name: string): unknown =>
      fake.workspaceSettings.has(key(name)) ? fake.workspaceSettings.get(key(name)) : fake.settings.get(key(name));
    const has = (name: string): boolean => fake.workspaceSettings.has(key(name)) || fake.settings.has(key(name));
    return {
      get: <T>(name: string, fallback?: T): T | undefined => (has(name) ? (value(name) as T) : fallback),
      has,
      inspect: (name: string) => ({
        key: key(name),
        globalValue: fake.settings.get(key(name)),
        workspaceValue: fake.workspaceSettings.get(key(name)),
      }),
      update: (name: string, value: unknown): Promise<void> => {
        fake.configure({ [key(name)]: value });
        return Promise.resolve();
      },
    };
  },
  getWorkspaceFolder(uri: Uri): { uri: Uri; name: string; index: number } | undefined {
    const folder = fake.workspaceFolder;
    if (folder === undefined || !uri.toString().startsWith(`${folder.toString()}/`)) {
      return undefined;
    }
    return { uri: folder, name: folder.path.split("/").pop() ?? "", index: 0 };
  },
  openTextDocument(uri: Uri): Promise<FakeTextDocument> {
    const document = fake.documents.find((candidate) => candidate.uri.toString() === uri.toString());
    return document ? Promise.resolve(document) : Promise.reject(new Error(`cannot open ${uri.toString()}`));
  },
  /**
   * Applies text edits to open documents (bumping their versions), creates files (opened as
   * documents) and deletes them, as the editor does.
   */
  applyEdit(edit: WorkspaceEdit): Promise<boolean> {
    fake.appliedEdits.push(edit);
    const find = (uri: Uri): FakeTextDocument | undefined =>
      fake.documents.find((candidate) => candidate.uri.toString() === uri.toString());
    for (const operation of edit.operations) {
      if (operation.kind === "create") {
        if (find(operation.uri) !== undefined || fake.files.has(operation.uri.toString())) {
          return Promise.resolve(false);
        }
        const contents = new TextDecoder().decode(operation.options?.contents ?? new Uint8Array());
        fake.open(operation.uri.toString(), contents);
      }
    }
    const targets = edit.entries().map(([uri, edits]) => ({
      document: fake.documents.find((candidate) => candidate.uri.toString() === uri.toString()),
      edits,
    }));
    if (targets.some(({ document }) => document === undefined)) {
      return Promise.resolve(false);
    }
    for (const { document, edits } of targets) {
      document?.setText(applyTextEdits(document.getText(), edits));
    }
    for (const operation of edit.operations) {
      if (operation.kind === "delete") {
        const document = find(operation.uri);
        if (document === undefined) {
          return Promise.resolve(false);
        }
        document.isClosed = true;
        fake.documents = fake.documents.filter((candidate) => candidate !== document);
        workspaceEvents.close.fire(document);
      }
    }
    return Promise.resolve(true);
  },
  registerTextDocumentContentProvider(): Disposable {
    return new Disposable(() => undefined);
  },
  createFileSystemWatcher() {
    const never = new EventEmitter<Uri>().event;
    return { onDidCreate: never, onDidChange: never, onDidDelete: never, dispose: () => undefined };
  },
  fs: {
    readFile: (): Promise<Uint8Array> => Promise.resolve(new Uint8Array()),
    /** Finds open documents and `fake.files`; anything else does not exist. */
    stat: (uri: Uri): Promise<{ type: number; size: number }> => {
      const known =
        fake.files.has(uri.toString()) || fake.documents.some((document) => document.uri.toString() === uri.toString());
      return known ? Promise.resolve({ type: 1, size: 0 }) : Promise.reject(new Error(`${uri.toString()}: no such file`));
    },
  },
};

/** The `vscode.commands` namespace. */
export const commands = {
  registerCommand(id: string, handler: (...args: unknown[]) => unknown): Disposable {
    if (registeredCommands.has(id)) {
      throw new Error(`command '${id}' already exists`);
    }
    registeredCommands.set(id, handler);
    return new Disposable(() => registeredCommands.delete(id));
  },
  executeCommand(id: string, ...args: unknown[]): Promise<unknown> {
    const handler = registeredCommands.get(id);
    if (handler !== undefined) {
      return Promise.resolve(handler(...args));
    }
    fake.executed.push({ command: id, args });
    fake.onExecute(id, args);
    return Promise.resolve(undefined);
  },
  getCommands(): Promise<string[]> {
    return Promise.resolve([...registeredCommands.keys()]);
  },
};

/** A document filter of a selector. */
interface DocumentFilter {
  scheme?: string;
  language?: string;
}

/** The `vscode.languages` namespace. */
export const languages = {
  /** A score above 0 when a filter's scheme and language match (no glob patterns). */
  match(selector: DocumentFilter | DocumentFilter[] | string, document: FakeTextDocument): number {
    const filters = Array.isArray(selector) ? selector : [selector];
    const matches = filters.some((filter) =>
      typeof filter === "string"
        ? filter === document.languageId
        : (filter.scheme === undefined || filter.scheme === document.uri.scheme) &&
          (filter.language === undefined || filter.language === document.languageId),
    );
    return matches ? 10 : 0;
  },
  createDiagnosticCollection(name = "") {
    return { name, set: () => undefined, delete: () => undefined, clear: () => undefined, dispose: () => undefined };
  },
  /** Providers the language client registered, by kind (`codeActions`, ...). */
  providers: new Map<string, unknown[]>(),
  registerCodeActionsProvider(_selector: unknown, provider: unknown): Disposable {
    const list = languages.providers.get("codeActions") ?? [];
    list.push(provider);
    languages.providers.set("codeActions", list);
    return new Disposable(() => list.splice(list.indexOf(provider), 1));
  },
};

/** The `vscode.env` namespace. */
export const env = {
  appName: "Fake Code",
  language: "en",
  clipboard: {
    readText: (): Promise<string> => Promise.resolve(fake.clipboard),
    writeText: (text: string): Promise<void> => {
      fake.clipboard = text;
      return Promise.resolve();
    },
  },
  openExternal: (): Promise<boolean> => Promise.resolve(false),
};

/** The API version the fake stands for. */
export const version = "1.82.0";
