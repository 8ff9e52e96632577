/**
 * Schedule Workbench for JupyterLab: viewers for schedule files, traces and
 * tuning databases (no kernel needed), a launcher card that opens a notebook
 * with the schedule editor, and "Open in notebook" on a schedule file.
 */

import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import {
  Dialog,
  ICommandPalette,
  showDialog,
  showErrorMessage,
  WidgetTracker
} from '@jupyterlab/apputils';
import { PathExt } from '@jupyterlab/coreutils';
import { IDocumentWidget } from '@jupyterlab/docregistry';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { ILauncher } from '@jupyterlab/launcher';
import { LabIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { editorNotebook, freeName, INotebookContent, replayNotebook, scheduleStem } from './notebook';
import { IPickedWorkload, WorkloadPicker } from './picker';
import {
  DatabasePanel,
  DatabaseViewerFactory,
  SchedulePanel,
  ScheduleViewerFactory
} from './widgets';

export namespace CommandIDs {
  export const create = 'schedule-workbench:new';
  export const openInNotebook = 'schedule-workbench:open-in-notebook';
}

export const SCHEDULE_FILE_TYPE = 'workbench-schedule';
export const TRACE_FILE_TYPE = 'workbench-trace';
export const RECORDS_FILE_TYPE = 'workbench-records';
export const SCHEDULE_FACTORY = 'Schedule Viewer';
export const DATABASE_FACTORY = 'Tuning Database Viewer';

const workbenchIcon = new LabIcon({
  name: 'schedule-workbench:icon',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24">' +
    '<g class="jp-icon3" fill="#616161">' +
    '<rect x="3" y="3" width="18" height="3" rx="1"/>' +
    '<rect x="6" y="8" width="15" height="3" rx="1"/>' +
    '<rect x="9" y="13" width="12" height="3" rx="1"/>' +
    '<rect x="6" y="18" width="15" height="3" rx="1"/></g></svg>'
});

class PickerBody extends Widget implements Dialog.IBodyWidget<IPickedWorkload> {
  constructor() {
    const picker = new WorkloadPicker(document);
    super({ node: picker.node });
    this._picker = picker;
  }

  getValue(): IPickedWorkload {
    return this._picker.getValue();
  }

  private _picker: WorkloadPicker;
}

async function listNames(app: JupyterFrontEnd, dir: string): Promise<string[]> {
  const model = await app.serviceManager.contents.get(dir, { content: true });
  return Array.isArray(model.content) ? model.content.map((m: { name: string }) => m.name) : [];
}

async function createNotebook(
  app: JupyterFrontEnd,
  dir: string,
  stem: string,
  content: INotebookContent
): Promise<string> {
  const name = freeName(stem, await listNames(app, dir));
  const path = dir ? `${dir}/${name}` : name;
  await app.serviceManager.contents.save(path, { type: 'notebook', format: 'json', content });
  await app.commands.execute('docmanager:open', { path, factory: 'Notebook' });
  return path;
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'schedule-workbench:plugin',
  description: 'Schedule Workbench viewers, launcher card and notebook commands.',
  autoStart: true,
  optional: [ILauncher, ICommandPalette, IDefaultFileBrowser, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    launcher: ILauncher | null,
    palette: ICommandPalette | null,
    browser: IDefaultFileBrowser | null,
    restorer: ILayoutRestorer | null
  ) => {
    const { docRegistry } = app;
    // JupyterLab matches multi-dot extensions (".schedule.json" before ".json"),
    // so these take precedence over the JSON file type for the default viewer.
    docRegistry.addFileType({
      name: SCHEDULE_FILE_TYPE,
      icon: workbenchIcon,
      displayName: 'Schedule file',
      extensions: ['.schedule.json'],
      mimeTypes: ['application/json'],
      contentType: 'file',
      fileFormat: 'text'
    });
    docRegistry.addFileType({
      name: TRACE_FILE_TYPE,
      icon: workbenchIcon,
      displayName: 'Schedule trace',
      extensions: ['.trace.json'],
      mimeTypes: ['application/json'],
      contentType: 'file',
      fileFormat: 'text'
    });
    docRegistry.addFileType({
      name: RECORDS_FILE_TYPE,
      icon: workbenchIcon,
      displayName: 'Tuning database records',
      extensions: [],
      pattern: '^records\\.jsonl$',
      mimeTypes: ['text/jsonl'],
      contentType: 'file',
      fileFormat: 'text'
    });

    const scheduleFactory = new ScheduleViewerFactory({
      name: SCHEDULE_FACTORY,
      label: 'Schedule Viewer',
      fileTypes: [SCHEDULE_FILE_TYPE, TRACE_FILE_TYPE, 'json'],
      defaultFor: [SCHEDULE_FILE_TYPE, TRACE_FILE_TYPE],
      modelName: 'text',
      readOnly: true
    });
    const databaseFactory = new DatabaseViewerFactory(
      {
        name: DATABASE_FACTORY,
        label: 'Tuning Database Viewer',
        fileTypes: [RECORDS_FILE_TYPE, 'jsonl'],
        defaultFor: [RECORDS_FILE_TYPE],
        modelName: 'text',
        readOnly: true
      },
      app.serviceManager.contents
    );
    docRegistry.addWidgetFactory(scheduleFactory);
    docRegistry.addWidgetFactory(databaseFactory);

    const scheduleTracker = new WidgetTracker<IDocumentWidget<SchedulePanel>>({
      namespace: 'schedule-workbench-viewer'
    });
    const databaseTracker = new WidgetTracker<IDocumentWidget<DatabasePanel>>({
      namespace: 'schedule-workbench-database'
    });
    scheduleFactory.widgetCreated.connect((_, widget) => {
      widget.title.icon = workbenchIcon; // DocumentWidget leaves the tab without an icon
      widget.context.pathChanged.connect(() => void scheduleTracker.save(widget));
      void scheduleTracker.add(widget);
    });
    databaseFactory.widgetCreated.connect((_, widget) => {
      widget.title.icon = workbenchIcon;
      widget.context.pathChanged.connect(() => void databaseTracker.save(widget));
      void databaseTracker.add(widget);
    });
    if (restorer) {
      void restorer.restore(scheduleTracker, {
        command: 'docmanager:open',
        args: widget => ({ path: widget.context.path, factory: SCHEDULE_FACTORY }),
        name: widget => widget.context.path
      });
      void restorer.restore(databaseTracker, {
        command: 'docmanager:open',
        args: widget => ({ path: widget.context.path, factory: DATABASE_FACTORY }),
        name: widget => widget.context.path
      });
    }

    const currentDir = (args: Record<string, unknown>): string =>
      typeof args.cwd === 'string' ? args.cwd : browser?.model.path ?? '';

    app.commands.addCommand(CommandIDs.create, {
      label: 'New schedule workbench',
      icon: workbenchIcon,
      caption: 'Open a notebook with the schedule editor on a chosen workload',
      execute: async args => {
        let picked: IPickedWorkload;
        if (typeof args.workload === 'string') {
          picked = { name: args.workload, sizes: (args.sizes as Record<string, number>) ?? {} };
        } else {
          const result = await showDialog({
            title: 'New schedule workbench',
            body: new PickerBody(),
            buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Create' })]
          });
          if (!result.button.accept || !result.value) {
            return;
          }
          picked = result.value;
        }
        try {
          const content = editorNotebook(picked.name, picked.sizes);
          return await createNotebook(app, currentDir(args), `${picked.name}_workbench`, content);
        } catch (e) {
          void showErrorMessage('New schedule workbench', String((e as Error).message ?? e));
        }
      }
    });

    const selectedSchedule = (args: Record<string, unknown>): string | null => {
      if (typeof args.path === 'string') {
        return args.path;
      }
      const current = app.shell.currentWidget;
      if (current && scheduleTracker.has(current)) {
        return (current as IDocumentWidget<SchedulePanel>).context.path;
      }
      const first = browser?.selectedItems().next();
      return first && !first.done && first.value.type === 'file' ? first.value.path : null;
    };

    app.commands.addCommand(CommandIDs.openInNotebook, {
      label: 'Open in notebook',
      caption: 'Create a notebook beside this schedule file that replays it in a TraceStepper',
      execute: async args => {
        const path = selectedSchedule(args);
        if (!path) {
          void showErrorMessage('Open in notebook', 'Select a schedule file first.');
          return;
        }
        const name = PathExt.basename(path);
        try {
          return await createNotebook(
            app,
            PathExt.dirname(path),
            `${scheduleStem(name)}_replay`,
            replayNotebook(name)
          );
        } catch (e) {
          void showErrorMessage('Open in notebook', String((e as Error).message ?? e));
        }
      }
    });

    app.contextMenu.addItem({
      command: CommandIDs.openInNotebook,
      selector: `.jp-DirListing-item[data-file-type="${SCHEDULE_FILE_TYPE}"]`,
      rank: 3
    });
    app.contextMenu.addItem({
      command: CommandIDs.openInNotebook,
      selector: '.wb-schedule-viewer',
      rank: 1
    });
    if (launcher) {
      launcher.add({ command: CommandIDs.create, category: 'Other', rank: 1 });
    }
    if (palette) {
      palette.addItem({ command: CommandIDs.create, category: 'Schedule Workbench' });
      palette.addItem({ command: CommandIDs.openInNotebook, category: 'Schedule Workbench' });
    }
  }
};

export default plugin;
