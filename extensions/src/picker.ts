/**
 * The "New schedule workbench" dialog's body: a workload list and its sizes
 * (plain DOM, tested in jsdom).
 */

import { IWorkloadInfo, workloads } from './notebook';

export interface IPickedWorkload {
  name: string;
  sizes: Record<string, number>;
}

/** The picker's DOM and a reader for the chosen workload and sizes. */
export class WorkloadPicker {
  readonly node: HTMLElement;
  private doc: Document;
  private select: HTMLSelectElement;
  private sizesBox: HTMLElement;

  constructor(doc: Document, choices: IWorkloadInfo[] = workloads, initial = 'mm_relu') {
    this.doc = doc;
    this.node = doc.createElement('div');
    this.node.className = 'wb-picker';
    const label = doc.createElement('label');
    label.textContent = 'Workload ';
    this.select = doc.createElement('select');
    this.select.className = 'wb-picker-workload';
    for (const w of choices) {
      const option = doc.createElement('option');
      option.value = w.name;
      option.textContent = w.name;
      this.select.appendChild(option);
    }
    if (choices.some(w => w.name === initial)) {
      this.select.value = initial;
    }
    label.appendChild(this.select);
    this.sizesBox = doc.createElement('div');
    this.sizesBox.className = 'wb-picker-sizes';
    this.node.append(label, this.sizesBox);
    this.select.addEventListener('change', () => this.showSizes());
    this.choices = choices;
    this.showSizes();
  }

  private choices: IWorkloadInfo[];

  private showSizes(): void {
    const info = this.choices.find(w => w.name === this.select.value);
    this.sizesBox.replaceChildren();
    for (const [key, value] of Object.entries(info?.sizes ?? {})) {
      const label = this.doc.createElement('label');
      label.className = 'wb-picker-size';
      label.textContent = `${key} `;
      const input = this.doc.createElement('input');
      input.type = 'number';
      input.min = '1';
      input.step = '1';
      input.value = String(value);
      input.dataset.size = key;
      label.appendChild(input);
      this.sizesBox.appendChild(label);
    }
  }

  /** The chosen workload and sizes (sizes as typed; notebook.ts checks them). */
  getValue(): IPickedWorkload {
    const sizes: Record<string, number> = {};
    this.sizesBox.querySelectorAll('input').forEach(input => {
      sizes[(input as HTMLInputElement).dataset.size as string] = Number((input as HTMLInputElement).value);
    });
    return { name: this.select.value, sizes };
  }
}
