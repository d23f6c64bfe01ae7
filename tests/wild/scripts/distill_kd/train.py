# Knowledge distillation (Hinton et al.) the way the KD tutorials write it: a bigger
# teacher trained first and frozen in eval mode, a small student trained on a soft
# KL term at temperature T (scaled by T*T) mixed with the hard-label cross-entropy.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(42)
X = torch.randn(256, 20)
y = (X[:, :3].sum(1) > 0).long() + (X[:, 3] > 0.5).long() * 2  # 4 classes
train_loader = DataLoader(TensorDataset(X, y), batch_size=32, shuffle=True)


class DeepNN(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.classifier = nn.Sequential(
            nn.Linear(20, 128),
            nn.ReLU(),
            nn.Dropout(0.1),
            nn.Linear(128, 64),
            nn.ReLU(),
            nn.Linear(64, num_classes),
        )

    def forward(self, x):
        return self.classifier(x)


class LightNN(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.classifier = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, num_classes))

    def forward(self, x):
        return self.classifier(x)


def train(model, train_loader, epochs, learning_rate):
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    model.train()
    for _epoch in range(epochs):
        for inputs, labels in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(inputs), labels)
            loss.backward()
            optimizer.step()


def train_knowledge_distillation(
    teacher,
    student,
    train_loader,
    epochs,
    learning_rate,
    T,
    soft_target_loss_weight,
    ce_loss_weight,
):
    ce_loss = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(student.parameters(), lr=learning_rate)

    teacher.eval()  # Teacher set to evaluation mode
    student.train()  # Student to train mode

    for epoch in range(epochs):
        running_loss = 0.0
        for inputs, labels in train_loader:
            optimizer.zero_grad()

            # Forward pass with the teacher model - do not save gradients here as we do not change the teacher's weights
            with torch.no_grad():
                teacher_logits = teacher(inputs)

            # Forward pass with the student model
            student_logits = student(inputs)

            # Soften the student logits by applying softmax first and log() second
            soft_targets = nn.functional.softmax(teacher_logits / T, dim=-1)
            soft_prob = nn.functional.log_softmax(student_logits / T, dim=-1)

            # Calculate the soft targets loss. Scaled by T**2 as suggested by the authors of the paper "Distilling the knowledge in a neural network"
            soft_targets_loss = F.kl_div(soft_prob, soft_targets, reduction="batchmean") * (T**2)

            # Calculate the true label loss
            label_loss = ce_loss(student_logits, labels)

            # Weighted sum of the two losses
            loss = soft_target_loss_weight * soft_targets_loss + ce_loss_weight * label_loss

            loss.backward()
            optimizer.step()

            running_loss += loss.item()
            print(f"Epoch {epoch + 1}/{epochs}, Loss: {loss.item():.4f}")


nn_deep = DeepNN()
nn_light = LightNN()
if __name__ == "__main__":
    import os

    # the teacher was trained earlier (train(nn_deep, ...)); its checkpoint is loaded when present
    if os.path.exists("teacher.pth"):
        nn_deep.load_state_dict(torch.load("teacher.pth"))
    train_knowledge_distillation(
        teacher=nn_deep,
        student=nn_light,
        train_loader=train_loader,
        epochs=1,
        learning_rate=0.001,
        T=2,
        soft_target_loss_weight=0.25,
        ce_loss_weight=0.75,
    )
