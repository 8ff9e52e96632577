/**
 * JupyterLab document widgets around the DOM views in render.ts: a schedule
 * / trace viewer and a tuning-database viewer. Both read the file through the
 * document context (the contents API): no kernel is started.
 */

import { PathExt } from '@jupyterlab/coreutils';
import {
  ABCWidgetFactory,
  DocumentRegistry,
  DocumentWidget,
  IDocumentWidget
} from '@jupyterlab/docregistry';
import { Contents } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

import { parseDatabase } from './database';
import { parseWorkbenchFile } from './files';
import { renderDatabase, renderMessage, ScheduleView } from './render';

/** The schedule/trace viewer panel; re-renders when the file changes on disk. */
export class SchedulePanel extends Widget {
  readonly view: ScheduleView;

  constructor(context: DocumentRegistry.IContext<DocumentRegistry.IModel>) {
    super();
    this.addClass('wb-viewer-panel');
    this.view = new ScheduleView(document, this.node);
    this._context = context;
    renderMessage(document, this.node, 'Loading…');
    void context.ready.then(() => {
      this._render();
      context.model.contentChanged.connect(this._render, this);
    });
  }

  protected onActivateRequest(): void {
    this.node.focus();
  }

  private _render(): void {
    this.view.show(parseWorkbenchFile(this._context.model.toString()));
  }

  private _context: DocumentRegistry.IContext<DocumentRegistry.IModel>;
}

export class ScheduleViewerFactory extends ABCWidgetFactory<
  IDocumentWidget<SchedulePanel>,
  DocumentRegistry.IModel
> {
  protected createNewWidget(
    context: DocumentRegistry.IContext<DocumentRegistry.IModel>
  ): IDocumentWidget<SchedulePanel> {
    const content = new SchedulePanel(context);
    const widget = new DocumentWidget({ content, context });
    widget.addClass('wb-document');
    return widget;
  }
}

/** The tuning-database viewer: records.jsonl, with workloads.jsonl read beside it. */
export class DatabasePanel extends Widget {
  constructor(
    context: DocumentRegistry.IContext<DocumentRegistry.IModel>,
    contents: Contents.IManager
  ) {
    super();
    this.addClass('wb-db-panel');
    this.node.classList.add('wb-db-viewer');
    this.node.tabIndex = 0;
    this._context = context;
    this._contents = contents;
    renderMessage(document, this.node, 'Loading…');
    void context.ready.then(() => {
      void this._render();
      context.model.contentChanged.connect(() => void this._render(), this);
    });
  }

  private async _render(): Promise<void> {
    const path = this._context.path;
    const dir = PathExt.dirname(path);
    const workloadsPath = dir ? `${dir}/workloads.jsonl` : 'workloads.jsonl';
    let workloads: string | null = null;
    try {
      const model = await this._contents.get(workloadsPath, { content: true, format: 'text', type: 'file' });
      workloads = typeof model.content === 'string' ? model.content : null;
    } catch {
      workloads = null; // not there: records are shown without names or GFLOPS
    }
    if (this.isDisposed) {
      return;
    }
    const db = parseDatabase(this._context.model.toString(), workloads);
    const draw = (filter: number | null): void => {
      this._filter = filter;
      renderDatabase(document, this.node, db, filter, draw);
    };
    draw(this._filter !== null && db.workloads.has(this._filter) ? this._filter : null);
  }

  private _context: DocumentRegistry.IContext<DocumentRegistry.IModel>;
  private _contents: Contents.IManager;
  private _filter: number | null = null;
}

export class DatabaseViewerFactory extends ABCWidgetFactory<
  IDocumentWidget<DatabasePanel>,
  DocumentRegistry.IModel
> {
  constructor(
    options: DocumentRegistry.IWidgetFactoryOptions<IDocumentWidget<DatabasePanel>>,
    contents: Contents.IManager
  ) {
    super(options);
    this._contents = contents;
  }

  protected createNewWidget(
    context: DocumentRegistry.IContext<DocumentRegistry.IModel>
  ): IDocumentWidget<DatabasePanel> {
    const content = new DatabasePanel(context, this._contents);
    const widget = new DocumentWidget({ content, context });
    widget.addClass('wb-document');
    return widget;
  }

  private _contents: Contents.IManager;
}
